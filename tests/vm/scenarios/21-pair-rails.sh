#!/usr/bin/env bash
# Seconds: 287
# Scenario: `gdrprov bench pair --all-nics` and `verify --peer` between two guests joined by TWO private
# socket links (a soft-RoCE device on each: rxe0 on the first, rxe1 on the second, in both guests). Rails
# pair by NIC name (rail 0: rxe0 <-> rxe0, rail 1: rxe1 <-> rxe1); the guests have no GPU, so every rail
# says it has none and runs on host memory. Each rail's traffic is seen on its own NIC (the rxe
# counters), not the other. Then `verify PROFILE --peer` adds the pair check to the readiness report
# (passed, and failed with a wrong secret).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov bench pair -- --all-nics

# hostA listens on both links, hostB connects to both.
vm_launch hostA -netdev "socket,id=p0,listen=127.0.0.1:@PORT2@" -device "virtio-net-pci,netdev=p0,mac=52:54:00:00:97:01,romfile=" \
  -netdev "socket,id=p1,listen=127.0.0.1:@PORT3@" -device "virtio-net-pci,netdev=p1,mac=52:54:00:00:96:01,romfile="
l0=$(cat "$(vm_gdir hostA)/port2"); l1=$(cat "$(vm_gdir hostA)/port3")
vm_launch hostB -netdev "socket,id=p0,connect=127.0.0.1:$l0" -device "virtio-net-pci,netdev=p0,mac=52:54:00:00:97:02,romfile=" \
  -netdev "socket,id=p1,connect=127.0.0.1:$l1" -device "virtio-net-pci,netdev=p1,mac=52:54:00:00:96:02,romfile="
vm_wait_up hostA
vm_wait_up hostB
for h in hostA hostB; do vm_install_gdrprov $h; done

# link 0: 10.97.0.0/24, rxe0; link 1: 10.96.0.0/24, rxe1 (by MAC, so the names cannot swap).
declare -A addr0=([hostA]=10.97.0.1 [hostB]=10.97.0.2) addr1=([hostA]=10.96.0.1 [hostB]=10.96.0.2)
for h in hostA hostB; do
  n=${h: -1}; n=$([ "$n" = A ] && echo 01 || echo 02)
  for l in 0 1; do
    a=$([ $l = 0 ] && echo "${addr0[$h]}" || echo "${addr1[$h]}")
    m=52:54:00:00:$([ $l = 0 ] && echo 97 || echo 96):$n
    vm_ssh $h "cat > /etc/systemd/network/10-link$l.network <<EOT
[Match]
MACAddress=$m
[Network]
Address=$a/24
LinkLocalAddressing=no
IPv6AcceptRA=no
EOT" >/dev/null
  done
  vm_ssh $h "networkctl reload && for i in \$(seq 60); do ip -o -4 addr | grep -q ' ${addr0[$h]}/' && ip -o -4 addr | grep -q ' ${addr1[$h]}/' && exit 0; sleep 0.5; done; ip -o -4 addr; exit 1" >/dev/null ||
    fail "$h: the two link addresses did not come up"
  nic0=$(vm_ssh $h "ip -o -4 addr | awk '\$4 == \"${addr0[$h]}/24\" {print \$2}'")
  nic1=$(vm_ssh $h "ip -o -4 addr | awk '\$4 == \"${addr1[$h]}/24\" {print \$2}'")
  vm_rxe $h "$nic0" rxe0
  vm_rxe $h "$nic1" rxe1
done
ok "two guests, two private links: rxe0 on ${addr0[hostA]} <-> ${addr0[hostB]}, rxe1 on ${addr1[hostA]} <-> ${addr1[hostB]}"

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$VM_RUN_DIR/pair.token"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$VM_RUN_DIR/wrong.token"
chmod 600 "$VM_RUN_DIR/pair.token" "$VM_RUN_DIR/wrong.token"
for h in hostA hostB; do
  vm_copy_in $h "$VM_RUN_DIR/pair.token" /root/pair.token
  vm_copy_in $h "$VM_RUN_DIR/wrong.token" /root/wrong.token
done

PORT=18516
# listen HOST OPTS: a listener in the background; wait until it listens.
listen() {
  local h=$1; shift
  vm_ssh "$h" "rm -f /tmp/pl.*; nohup sh -c 'gdrprov --format json bench pair --listen $* --token-file /root/pair.token --timeout 300; echo \$? > /tmp/pl.rc' > /tmp/pl.json 2> /tmp/pl.err < /dev/null &
    for i in \$(seq 120); do ss -ltn | grep -q ':$PORT ' && exit 0; sleep 0.5; done; cat /tmp/pl.err; exit 1" >/dev/null ||
    fail "$h: the listener did not listen"
}
listener_done() {
  vm_ssh "$1" "for i in \$(seq $(( $2 * 2 ))); do [ -s /tmp/pl.rc ] && { cat /tmp/pl.rc; exit 0; }; sleep 0.5; done; exit 1" ||
    fail "$1: the listener did not exit within $2 s"
}
# sent HOST: rxe0's and rxe1's sent packets (the rxe hw counters).
sent() { vm_ssh "$1" "echo \$(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts /sys/class/infiniband/rxe1/ports/1/hw_counters/sent_pkts)"; }

# --- bench pair --all-nics: both ends, text at the listener, JSON at the client ---
read -r a0 a1 < <(sent hostB)
listen hostA "${addr0[hostA]} --all-nics"
rc=0; out=$(vm_ssh hostB "gdrprov --format json bench pair ${addr0[hostA]} --all-nics --token-file /root/pair.token --size 64K,1M --iters 20 --min-gbps 0.0001 --timeout 300") || rc=$?
printf '%s\n' "$out" > "$VM_RUN_DIR/21-rails-client.json"
lrc=$(listener_done hostA 120)
vm_ssh hostA "cat /tmp/pl.json" > "$VM_RUN_DIR/21-rails-listener.json"
vm_ssh hostA "cat /tmp/pl.err" | sed 's/^/    listener| /'
[ "$rc" = 0 ] || { printf '%s\n' "$out" | tail -40; fail "bench pair --all-nics: client exit $rc"; }
[ "$lrc" = 0 ] || fail "bench pair --all-nics: listener exit $lrc"
read -r b0 b1 < <(sent hostB)
for f in 21-rails-client.json 21-rails-listener.json; do
  python3 - "$VM_RUN_DIR/$f" <<'EOF' || fail "$f: the per-rail report is not as expected"
import json, sys
doc = json.load(open(sys.argv[1]))
rails = doc["rails"]
assert doc["passed"] is True, doc["passed"]
assert [r["rail"] for r in rails] == ["rxe0", "rxe1"], [r["rail"] for r in rails]
want_gid = {"rxe0": "::ffff:10.97.0.", "rxe1": "::ffff:10.96.0."}
for i, r in enumerate(rails):
    assert r["index"] == i and r["error"] is None, r
    # No GPU in the guests: the rail says so, and both ends ran on host memory.
    assert r["gpu_pci"] is None and "no PCIe path to a GPU" in r["note"], r
    assert r["client"]["memory"] == r["listener"]["memory"] == "host", r
    assert r["client"]["port"]["device"] == r["listener"]["port"]["device"] == r["rail"], r
    for end in ("client", "listener"):
        assert r[end]["port"]["gid"].startswith(want_gid[r["rail"]]), (end, r[end]["port"])
    assert r["passed"] and r["data_check"]["passed"], r
    assert [s["bytes"] for s in r["results"]] == [65536, 1048576], r["results"]
    assert all(s["data_check"]["passed"] and s["average_gbps"] > 0 for s in r["results"]), r["results"]
    print("  ok: %s: rail %d %s -> %s, %s" % (sys.argv[1].split("/")[-1], i, r["client"]["port"]["gid"],
          r["listener"]["port"]["gid"], ", ".join("%d B %.4f Gb/s" % (s["bytes"], s["average_gbps"]) for s in r["results"])))
EOF
done
ok "bench pair --all-nics: rails rxe0 <-> rxe0 and rxe1 <-> rxe1, each over its own link (GIDs), host memory, data check passed, in both ends' JSON"
# 2 rails x 2 sizes x (20 timed + 4 checked) transfers of at least 64 KiB: each NIC sent packets of its own.
{ [ $((b0 - a0)) -gt 500 ] && [ $((b1 - a1)) -gt 500 ]; } || fail "the rails' traffic is not on both NICs (hostB sent_pkts: rxe0 +$((b0 - a0)), rxe1 +$((b1 - a1)))"
ok "each rail's traffic went out on its own NIC (hostB sent_pkts: rxe0 +$((b0 - a0)), rxe1 +$((b1 - a1)))"

# The text report, rail by rail, at the client (the listener's was JSON).
listen hostA "${addr0[hostA]} --all-nics"
rc=0; txt=$(vm_ssh hostB "gdrprov bench pair ${addr0[hostA]} --all-nics --token-file /root/pair.token --size 64K --iters 10 --min-gbps 0.0001 --timeout 300") || rc=$?
listener_done hostA 120 >/dev/null
printf '%s\n' "$txt" | grep -E '^(rail|all rails|timing|data check)' | sed 's/^/    client| /'
[ "$rc" = 0 ] || fail "bench pair --all-nics (text): client exit $rc"
assert_contains "$txt" "rail 0 of 2: rxe0 <-> no GPU: rxe0 has no PCIe path to a GPU" "the text names rail 0 and says it has no GPU"
assert_contains "$txt" "rail 1 of 2: rxe1 <-> no GPU: rxe1 has no PCIe path to a GPU" "the text names rail 1 and says it has no GPU"
assert_contains "$txt" "all rails: PASS" "the text's verdict over all rails"

# --- verify PROFILE --peer: the pair check in the readiness report (a profile that asks only for the checks,
# which a GPU-less guest meets: the GPU checks skip, the loopback is off) ---
for h in hostA hostB; do
  vm_ssh $h "printf 'verify: { loopback: false }\n' > /root/pair.yaml"
done
listen hostA "--device rxe1"
rc=0; vout=$(vm_ssh hostB "gdrprov --format json verify /root/pair.yaml --peer ${addr1[hostA]} --token-file /root/pair.token --device rxe1 --min-gbps 0.0001 --duration 2") || rc=$?
printf '%s\n' "$vout" > "$VM_RUN_DIR/21-verify-peer.json"
lrc=$(listener_done hostA 120)
{ [ "$rc" = 0 ] && [ "$lrc" = 0 ]; } || { printf '%s\n' "$vout" | tail -30; fail "verify --peer: exit $rc, listener $lrc"; }
line=$(printf '%s' "$vout" | python3 -c '
import json, sys
r = json.load(sys.stdin)
c = [c for c in r["checks"] if c["name"] == "pair"]
assert r["ready"] is True and len(c) == 1 and c[0]["status"] == "pass", (r["ready"], c)
print(c[0]["detail"])') || fail "verify --peer: no passed pair check in a ready report: $vout"
assert_contains "$line" "to ${addr1[hostA]}:$PORT (rxe1 -> rxe1, host -> host)" "verify's pair check names the peer, both NICs and both memories"
assert_contains "$line" "data check passed" "verify's pair check ran the data check"
ok "verify --peer: ready, with the pair check: $line"

# A wrong secret: the pair check fails and so does the readiness.
listen hostA "--device rxe1"
rc=0; vout=$(vm_ssh hostB "gdrprov verify /root/pair.yaml --peer ${addr1[hostA]} --token-file /root/wrong.token --device rxe1 --min-gbps 0.0001 --duration 2" 2>&1) || rc=$?
listener_done hostA 60 >/dev/null || true
printf '%s\n' "$vout" | grep -i pair | sed 's/^/    verify| /'
[ "$rc" != 0 ] || fail "verify --peer with a wrong secret exited 0"
assert_contains "$vout" "wrong secret" "verify's failed pair check says why"

vm_poweroff hostA &
vm_poweroff hostB
wait
