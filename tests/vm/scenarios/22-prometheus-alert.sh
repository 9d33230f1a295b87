#!/usr/bin/env bash
# Seconds: 250
# Scenario: the shipped alert rules in a real Prometheus (Debian's, on the host) scraping Debian's
# prometheus-node-exporter in a guest, whose textfile collector reads what gdrprov writes: a guest broken on
# purpose (a module the profile blocks is loaded) makes GdrprovNodeNotReady reach `firing` for that guest's
# instance in /api/v1/alerts; `gdrprov apply`, then the package's re-check unit rewriting the textfile, makes
# it resolve
# How, and why so:
# - node-exporter: the guests have no network, and baking it into the image would change the recipe (every
#   flavor rebuilt). Debian's .deb of the host's candidate version (vm_host_deb: apt's cache, else one
#   `apt-get download`, kept in the image cache) is installed with dpkg -i; the image already has all it
#   depends on (adduser, libc6, init-system-helpers). Its postinst starts it with Debian's defaults:
#   :9100, textfile collector on /var/lib/prometheus/node-exporter.
# - Prometheus runs on the host and scrapes the guest through a forward of the guest's ssh master
#   (`ssh -O forward -L`): nothing is added to the guest's NIC. The scrape asks node-exporter for its
#   textfile collector only (`collect[]`, node-exporter's own filter): the rest costs guest CPU under TCG.
# - The rules are examples/prometheus/gdrprov-rules.yml as shipped, except GdrprovNodeNotReady's `for: 15m`,
#   which a copy made here sets to 30s (one line changed, checked with diff and promtool) to fit CI's time.
# - The textfile: the profile names it (`vars.gdrprov-textfile`, Debian's textfile directory). Broken, the
#   operator's periodic `gdrprov verify --textfile` writes it; after the fix, the re-check unit the package
#   ships (gdrprov-recheck.service, which its path unit starts when modules change) rewrites it from the
#   profile applied, as on a real node.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov verify -- --textfile
require_gdrprov recheck
{ command -v prometheus && command -v promtool; } >/dev/null ||
  fail "no prometheus/promtool on this host (Debian's prometheus: bash scripts/ensure-packages.sh test)"

FOR=30s FOR_S=30
work=$VM_RUN_DIR/22-prometheus
mkdir -p "$work"
prom_pid=
prom_stop() { [ -z "$prom_pid" ] || { kill "$prom_pid" 2>/dev/null; wait "$prom_pid" 2>/dev/null; rm -rf "$work/data"; }; }
trap 'prom_stop; vm_cleanup ${VM_TRAP_SCOPE:-mine}' EXIT

# The shipped rules with GdrprovNodeNotReady's `for:` shortened, and nothing else changed.
rules=$VM_DIR/../../examples/prometheus/gdrprov-rules.yml
awk -v f="$FOR" '
  /^ *- alert: / { na = ($3 == "GdrprovNodeNotReady") }
  na && /^ *for: / { sub(/for: .*/, "for: " f); n++ }
  { print }
  END { exit n != 1 }' "$rules" > "$work/rules.yml" || fail "no single for: in GdrprovNodeNotReady of $rules"
changed=$(diff "$rules" "$work/rules.yml" | grep -c '^>' || true)
[ "$changed" = 1 ] || fail "the rules copy differs from $rules in $changed lines, want 1"
promtool check rules "$work/rules.yml" > "$work/promtool.out" 2>&1 || { cat "$work/promtool.out"; fail "promtool check rules on the copy"; }
ok "rules: the shipped file, GdrprovNodeNotReady for: $FOR ($(diff "$rules" "$work/rules.yml" | grep '^<' | tr -s ' '))"

deb=$(vm_host_deb prometheus-node-exporter)
info "node-exporter package: $(basename "$deb")"

g=promnode
vm_fresh $g
vm_copy_in $g "$deb" /root/node-exporter.deb
vm_ssh $g "dpkg -i /root/node-exporter.deb > /root/node-exporter-install.log 2>&1" ||
  fail "dpkg -i $(basename "$deb") in the guest: $(vm_ssh $g 'tail -5 /root/node-exporter-install.log')"
vm_ssh $g "for i in \$(seq 60); do ss -ltn | grep -q ':9100 ' && exit 0; sleep 1; done; exit 1" ||
  fail "prometheus-node-exporter is not listening on :9100: $(vm_ssh $g 'systemctl status prometheus-node-exporter --no-pager | tail -5' 2>&1)"
textdir=/var/lib/prometheus/node-exporter   # Debian's default (--collector.textfile.directory)
vm_ssh $g "test -d $textdir" || fail "node-exporter's textfile directory $textdir does not exist"
ok "prometheus-node-exporter installed and running (textfile directory $textdir)"
tf=$textdir/gdrprov.prom

# The profile, where the re-check finds it (/etc/gdrprov/NAME.yaml), naming the textfile.
vm_ssh $g "mkdir -p /etc/gdrprov && printf 'modules:\n  absent: [dummy]\nvars:\n  gdrprov-textfile: $tf\n' > /etc/gdrprov/gpu-node.yaml"
instance="$(vm_ssh $g hostname):9100"

# Prometheus on the host, scraping the guest through the ssh master's forward.
fwd=$(vm_free_port) || fail "no free port"
# shellcheck disable=SC2046
ssh $(vm_ssh_opts $g) -O forward -L "127.0.0.1:$fwd:127.0.0.1:9100" root@127.0.0.1 </dev/null ||
  fail "ssh -O forward to the guest's :9100 failed (no ssh master?)"
port=$(vm_free_port) || fail "no free port"
cat > "$work/prometheus.yml" <<EOF
global:
  scrape_interval: 3s
  evaluation_interval: 3s
rule_files: ['$work/rules.yml']
scrape_configs:
  - job_name: node
    params: {'collect[]': [textfile]}
    static_configs:
      - targets: ['127.0.0.1:$fwd']
        labels: {instance: '$instance'}
EOF

# promq WHAT ARG: `alerts` (this guest's GdrprovNodeNotReady: "STATE ACTIVE_AT" in epoch seconds, nothing
# when none),
# `active` (every pending or firing alert: "NAME STATE"), `value EXPR` (the first sample's value).
promq() {
  python3 - "$port" "$instance" "$@" <<'PY'
import datetime, json, sys, urllib.parse, urllib.request
port, inst, what = sys.argv[1], sys.argv[2], sys.argv[3]
def get(path):
    with urllib.request.urlopen('http://127.0.0.1:%s%s' % (port, path), timeout=10) as r:
        return json.load(r)['data']
if what == 'value':
    r = get('/api/v1/query?query=' + urllib.parse.quote(sys.argv[4]))['result']
    if r: print(r[0]['value'][1])
else:
    for a in get('/api/v1/alerts')['alerts']:
        l = a['labels']
        if what == 'active':
            print(l['alertname'], l.get('check', ''), a['state'])
        elif l['alertname'] == 'GdrprovNodeNotReady' and l.get('instance') == inst:
            # activeAt: RFC 3339 with nanoseconds; whole seconds are enough here
            at = datetime.datetime.strptime(a['activeAt'][:19], '%Y-%m-%dT%H:%M:%S')
            print(a['state'], int(at.replace(tzinfo=datetime.timezone.utc).timestamp()))
PY
}
# wait_for WHAT LIMIT CMD...: poll CMD (its output, non-empty = done) every second; echo the output.
wait_for() {
  local what=$1 limit=$2 t0 out; shift 2; t0=$(date +%s)
  while :; do
    kill -0 "$prom_pid" 2>/dev/null || { tail -20 "$work/prometheus.log" >&2; fail "prometheus exited"; }
    out=$("$@" 2>/dev/null) || out=
    [ -n "$out" ] && { echo "$out"; return 0; }
    [ "$(vm_since "$t0")" -lt "$limit" ] || {
      tail -5 "$work/prometheus.log" >&2; info "active alerts: $(promq active 2>&1 | tr '\n' ';')" >&2
      fail "$what: not within $limit s"; }
    sleep 1
  done
}
firing() { promq alerts | grep '^firing ' || true; }
ready_value() { promq value "gdrprov_ready{instance=\"$instance\"}"; }
ready_one() { [ "$(ready_value)" = 1 ] && echo 1; }

# Broken on purpose: the blocked module loaded, and the operator's periodic verify writes the textfile.
vm_ssh $g "modprobe dummy"
rc=0; vm_ssh $g "gdrprov verify /etc/gdrprov/gpu-node.yaml --no-loopback --textfile $tf" > "$work/verify.out" || rc=$?
grep -q 'FAIL  modules .*dummy' "$work/verify.out" || fail "verify names no loaded dummy: $(cat "$work/verify.out")"
[ "$rc" = 3 ] || fail "verify with dummy loaded: exit $rc, want 3 (not ready)"
vm_ssh $g "grep -x 'gdrprov_ready{profiles=\"gpu-node\"} 0' $tf" >/dev/null || fail "$tf has no gdrprov_ready 0"
t_broken=$(date +%s)
ok "broken: dummy loaded, verify exit 3, $tf says gdrprov_ready 0"

prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$port" > "$work/prometheus.log" 2>&1 &
prom_pid=$!
v=$(wait_for "Prometheus scraping gdrprov_ready of $instance" 120 ready_value)
[ "$v" = 0 ] || fail "Prometheus has gdrprov_ready{instance=\"$instance\"} $v, want 0"
ok "Prometheus (127.0.0.1:$port) scrapes $instance: gdrprov_ready 0 ($(vm_since "$t_broken") s after verify)"
p=$(wait_for "GdrprovNodeNotReady pending or firing for $instance" 60 promq alerts)
t_pending=$(date +%s)
info "GdrprovNodeNotReady ${p%% *} ($(vm_since "$t_broken") s after verify)"
f=$(wait_for "GdrprovNodeNotReady firing for $instance" $((FOR_S + 90)) firing)
t_firing=$(date +%s)
active_at=${f#firing }
# Prometheus fires at the first evaluation at least for: after activeAt (whole seconds: 1 s of slack).
[ $((t_firing - active_at)) -ge $((FOR_S - 1)) ] ||
  fail "firing $((t_firing - active_at)) s after its activeAt: the for: $FOR was not waited for"
ok "GdrprovNodeNotReady firing for $instance in /api/v1/alerts (active at +$((active_at - t_broken)) s, pending seen at +$((t_pending - t_broken)) s, firing seen at +$((t_firing - t_broken)) s after the verify)"
info "active alerts: $(promq active | tr '\n' ';')"

# The fix: gdrprov apply (blacklist, unload), then the package's re-check unit rewrites the textfile.
t_fix=$(date +%s)
vm_ssh $g "gdrprov apply /etc/gdrprov/gpu-node.yaml --yes" | sed 's/^/    apply| /'
lsm=$(vm_ssh $g "lsmod | awk '{print \$1}'")
assert_not_contains "$lsm" "dummy" "apply unloaded dummy"
vm_ssh $g "systemctl start gdrprov-recheck.service" || fail "gdrprov-recheck.service failed: $(vm_ssh $g 'journalctl -u gdrprov-recheck --no-pager | tail -5')"
vm_ssh $g "grep -x 'gdrprov_ready{profiles=\"gpu-node\"} 1' $tf && grep -q '^gdrprov_recheck_ready{trigger=\"modules\"} 1' $tf" >/dev/null ||
  fail "the re-check did not write gdrprov_ready 1 into $tf: $(vm_ssh $g "grep -v '^#' $tf | head -5")"
t_fixed=$(date +%s)
ok "fixed: apply + gdrprov-recheck.service in $((t_fixed - t_fix)) s; $tf says gdrprov_ready 1 (re-check trigger modules)"
wait_for "gdrprov_ready 1 in Prometheus for $instance" 60 ready_one >/dev/null
# Gone from /api/v1/alerts and from ALERTS (a failed query is not "gone").
resolved() {
  local a r
  a=$(promq alerts) && r=$(promq value "ALERTS{alertname=\"GdrprovNodeNotReady\",instance=\"$instance\"}") || return 1
  [ -z "$a$r" ] && echo resolved
}
wait_for "GdrprovNodeNotReady gone for $instance after the fix" 90 resolved >/dev/null
ok "GdrprovNodeNotReady resolved for $instance $(vm_since "$t_fixed") s after the re-check wrote the textfile ($(vm_since "$t_fix") s after apply began); gdrprov_ready 1"
info "active alerts: $(promq active | tr '\n' ';')"
vm_poweroff $g
