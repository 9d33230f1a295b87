#!/usr/bin/env bash
# Seconds: 500
# Scenario: gdrprov bench pair between two guests joined by a private socket NIC, soft-RoCE in each
# (built as 07): WRITE, READ and both directions at once, host memory, listener in either guest, data
# check passed; a wrong secret refused before anything is registered; a client killed mid-run and a
# listener killed mid-run each reported by the other end within the limit; a lowered MTU on one guest
# named at both ends; then bench/compare-pair.sh (gdrprov pair against ib_write_bw, same guests).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov bench pair -- --token-file

vm_launch hostA -netdev "socket,id=p0,listen=127.0.0.1:@PORT2@" -device "virtio-net-pci,netdev=p0,mac=52:54:00:00:98:01,romfile="
link=$(cat "$(vm_gdir hostA)/port2")
vm_launch hostB -netdev "socket,id=p0,connect=127.0.0.1:$link" -device "virtio-net-pci,netdev=p0,mac=52:54:00:00:98:02,romfile="
vm_wait_up hostA
vm_wait_up hostB
for h in hostA hostB; do vm_install_gdrprov $h; done

declare -A addr=([hostA]=10.98.0.1 [hostB]=10.98.0.2) mac=([hostA]=52:54:00:00:98:01 [hostB]=52:54:00:00:98:02)
declare -A nic
for h in hostA hostB; do
  vm_ssh $h "cat > /etc/systemd/network/10-peer.network <<EOT
[Match]
MACAddress=${mac[$h]}
[Network]
Address=${addr[$h]}/24
LinkLocalAddressing=no
IPv6AcceptRA=no
EOT
networkctl reload && for i in \$(seq 60); do ip -o -4 addr | grep -q ' ${addr[$h]}/' && exit 0; sleep 0.5; done; exit 1" >/dev/null ||
    fail "$h: no address ${addr[$h]} on the link NIC"
  nic[$h]=$(vm_ssh $h "ip -o -4 addr | awk '\$4 == \"${addr[$h]}/24\" {print \$2}'")
  vm_rxe $h "${nic[$h]}" rxe0
done
ok "two guests, rxe0 on the private link in each (${addr[hostA]}, ${addr[hostB]})"

# GDRPROV_VM_PAIR_ONLY=speed: only the speed comparison (after the set-up).
only_speed=$([ "${GDRPROV_VM_PAIR_ONLY:-}" = speed ] && echo 1 || echo 0)

# One secret for both (as an operator copies the file the listener wrote); another for the wrong client.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$VM_RUN_DIR/pair.token"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$VM_RUN_DIR/wrong.token"
chmod 600 "$VM_RUN_DIR/pair.token" "$VM_RUN_DIR/wrong.token"
for h in hostA hostB; do
  vm_copy_in $h "$VM_RUN_DIR/pair.token" /root/pair.token
  vm_copy_in $h "$VM_RUN_DIR/wrong.token" /root/wrong.token
done

PORT=18516
# listen HOST [OPTS]: start a listener in the background (default address: rxe0's own), wait until it listens.
listen() {
  local h=$1; shift
  vm_ssh "$h" "rm -f /tmp/pl.*; nohup sh -c 'gdrprov --format json bench pair --listen --device rxe0 --memory host --token-file /root/pair.token $*; echo \$? > /tmp/pl.rc' > /tmp/pl.json 2> /tmp/pl.err < /dev/null & echo \$! > /tmp/pl.shpid
    for i in \$(seq 120); do ss -ltn | grep -q ':$PORT ' && exit 0; sleep 0.5; done; cat /tmp/pl.err; exit 1" >/dev/null ||
    fail "$h: the listener did not listen"
}
# listener_done HOST SECS: wait for the listener to exit; echo its exit code.
listener_done() {
  vm_ssh "$1" "for i in \$(seq $(( $2 * 2 ))); do [ -s /tmp/pl.rc ] && { cat /tmp/pl.rc; exit 0; }; sleep 0.5; done; exit 1" ||
    fail "$1: the listener did not exit within $2 s"
}
json_get() { python3 -c "import json,sys; r=json.load(sys.stdin); print($1)"; }

if [ "$only_speed" = 0 ]; then
# The listener binds to rxe0's address only (never all addresses unless asked).
listen hostA
bound=$(vm_ssh hostA "ss -ltnH | awk '\$4 ~ /:$PORT\$/ {print \$4}'")
[ "$bound" = "${addr[hostA]}:$PORT" ] || fail "the listener bound to '$bound', not rxe0's ${addr[hostA]}:$PORT"
ok "the listener binds to rxe0's own address $bound"
vm_ssh hostA "rdma res show mr | grep -c gdrprov || true" | grep -qx 0 || fail "the listener registered memory before any client"
ok "a waiting listener has no memory region registered (rdma res show mr)"

# Wrong secret: refused at both ends, the listener never registered anything.
rc=0; out=$(vm_ssh hostB "gdrprov bench pair ${addr[hostA]} --device rxe0 --token-file /root/wrong.token --iters 5 --size 64K" 2>&1) || rc=$?
[ "$rc" != 0 ] || fail "a client with the wrong secret exited 0"
assert_contains "$out" "refused this client: wrong secret" "the client with the wrong secret is told it was refused"
lrc=$(listener_done hostA 30)
lerr=$(vm_ssh hostA "cat /tmp/pl.err")
printf '%s\n' "$lerr" | sed 's/^/    listener| /'
[ "$lrc" != 0 ] || fail "the listener exited 0 after refusing"
assert_contains "$lerr" "did not prove the shared secret" "the listener names the refusal"
assert_not_contains "$lerr" "registered the test buffer" "the listener registered nothing for the refused client"

# run_pair LISTENER CLIENT OP: one session, both ends' JSON checked.
run_pair() {
  local l=$1 c=$2 op=$3 rc=0 out
  listen "$l"
  out=$(vm_ssh "$c" "gdrprov --format json bench pair ${addr[$l]} --device rxe0 --memory host --token-file /root/pair.token --op $op --size 64K,1M --iters 40 --min-gbps 0.0001 --timeout 240") || rc=$?
  printf '%s\n' "$out" > "$VM_RUN_DIR/17-pair-$l-$op.json"
  [ "$rc" = 0 ] || { vm_ssh "$l" "cat /tmp/pl.err" >&2 || true; printf '%s\n' "$out" | tail -30; fail "pair $op ($c -> listener $l): client exit $rc"; }
  [ "$(listener_done "$l" 60)" = 0 ] || { vm_ssh "$l" "cat /tmp/pl.err"; fail "pair $op: listener in $l failed"; }
  local lj; lj=$(vm_ssh "$l" "cat /tmp/pl.json")
  for j in "$out" "$lj"; do
    printf '%s' "$j" | json_get 'r["passed"] and r["data_check"]["passed"] and all(s["data_check"]["passed"] and s["data_check"]["iterations"] > 0 for s in r["results"]) and r["client"]["memory"] == "host" == r["listener"]["memory"] and len(r["results"]) == 2' | grep -qx True ||
      { printf '%s\n' "$j" | tail -40; fail "pair $op ($c -> $l): report not passed"; }
  done
  local gb; gb=$(printf '%s' "$out" | json_get '" / ".join("%s: %.4f Gb/s, %d checked" % (s["bytes"], s["average_gbps"], s["data_check"]["iterations"]) for s in r["results"])')
  ok "pair $op, client $c -> listener $l, host memory: $gb; data check passed at both sizes (both ends' reports)"
}
run_pair hostA hostB write
run_pair hostA hostB read
run_pair hostB hostA write
# rxe_counters HOST: rxe0's non-zero error and retry counters (what the soft-RoCE device saw go wrong).
rxe_counters() {
  vm_ssh "$1" "cd /sys/class/infiniband/rxe0/ports/1/hw_counters 2>/dev/null && grep -H . * | grep -v ':0\$' | grep -Ei 'err|retr|seq|dup|drop|rnr'" 2>/dev/null |
    tr '\n' ' ' || true
}
# Both directions at once. In 2 of 5 runs of this scenario on a loaded host (2026-11-29), the bidirectional
# run ended with RemoteInvalidRequest (status 9) from the peer's rxe, the same binary passing it on the next
# run; write and read alone never did. Linux 6.1's rxe has known faults in resending a request after a
# local packet drop (e.g. upstream 6.5's "RDMA/rxe: Fix incomplete state save in rxe_requester"), which
# bidirectional traffic on a slow emulated link provokes; we have not proved that is the one seen.
# So a failed bidirectional run is run once more, with the rxe counters of both ends logged;
# a second failure is compared with perftest's own bidirectional run on the same link, at the same sizes,
# which says whether the link (rxe) or gdrprov is at fault.
bidir_ok=0
for try in 1 2; do
  if ( run_pair hostA hostB bidir ); then bidir_ok=1; break; fi
  info "pair bidir, try $try, failed; rxe counters: hostA: $(rxe_counters hostA); hostB: $(rxe_counters hostB)"
  [ "$try" = 1 ] && info "running pair bidir once more (see the comment above the loop)"
done
[ "$bidir_ok" = 1 ] && [ "$try" = 2 ] && info "pair bidir passed on its second try"
if [ "$bidir_ok" = 0 ]; then
  vm_ssh hostA "cat /tmp/pl.err" | tail -3 | sed 's/^/    listener| /'
  gidA=$(vm_rxe_gid_index hostA rxe0 "${addr[hostA]}"); gidB=$(vm_rxe_gid_index hostB rxe0 "${addr[hostB]}")
  vm_ssh hostA "nohup timeout 120 ib_write_bw -d rxe0 -x $gidA -s 65536 -n 200 -b -F -u 20 -p 18600 > /tmp/ibb.out 2>&1 < /dev/null &
    for i in \$(seq 60); do ss -ltn | grep -q ':18600 ' && exit 0; sleep 0.5; done; exit 1" >/dev/null
  rc=0; out=$(vm_ssh hostB "timeout 120 ib_write_bw -d rxe0 -x $gidB -s 65536 -n 200 -b -F -u 20 -p 18600 ${addr[hostA]}" 2>&1) || rc=$?
  printf '%s\n' "$out" | tail -6 | sed 's/^/    ib_write_bw -b| /'
  if [ "$rc" = 0 ]; then   # and at gdrprov's larger size (1 MiB: 1024 packets a message at MTU 1024)
    vm_ssh hostA "nohup timeout 120 ib_write_bw -d rxe0 -x $gidA -s 1048576 -n 40 -b -F -u 20 -p 18601 > /tmp/ibb1.out 2>&1 < /dev/null &
      for i in \$(seq 60); do ss -ltn | grep -q ':18601 ' && exit 0; sleep 0.5; done; exit 1" >/dev/null
    out=$(vm_ssh hostB "timeout 120 ib_write_bw -d rxe0 -x $gidB -s 1048576 -n 40 -b -F -u 20 -p 18601 ${addr[hostA]}" 2>&1) || rc=$?
    printf '%s\n' "$out" | tail -4 | sed 's/^/    ib_write_bw -b 1M| /'
  fi
  [ "$rc" != 0 ] || fail "pair bidir failed twice where ib_write_bw --bidirectional passed on the same link at 64 KiB and 1 MiB"
  info "pair bidir failed, and so did ib_write_bw --bidirectional (exit $rc) on this link"
  listen hostA
  rc=0; vm_ssh hostB "gdrprov bench pair ${addr[hostA]} --device rxe0 --token-file /root/pair.token --op bidir --size 4K --iters 20 --tx-depth 1 --min-gbps 0.0001" || rc=$?
  listener_done hostA 60 >/dev/null || true
  info "pair bidir at tx-depth 1, 4 KiB: exit $rc"
fi

# A client killed mid-run: the listener says so within its limit.
listen hostA "--timeout 200"
vm_ssh hostB "nohup gdrprov bench pair ${addr[hostA]} --device rxe0 --token-file /root/pair.token --size 1M --duration 120 --timeout 200 > /tmp/pc.out 2>&1 < /dev/null & echo \$! > /tmp/pc.pid" >/dev/null
vm_ssh hostA "for i in \$(seq 120); do grep -q 'registered the test buffer' /tmp/pl.err && exit 0; sleep 0.5; done; exit 1" >/dev/null || fail "the session did not start"
sleep 5
t0=$(date +%s)
# shellcheck disable=SC2016 # the guest's shell expands it
vm_ssh hostB 'kill -9 $(cat /tmp/pc.pid)'
lrc=$(listener_done hostA 60); dt=$(( $(date +%s) - t0 ))
lerr=$(vm_ssh hostA "cat /tmp/pl.err")
[ "$lrc" != 0 ] || fail "the listener exited 0 after its client was killed"
assert_contains "$lerr" "closed the connection during the client's timed run of 1 MiB" "the listener reports its client gone mid-run"
ok "client killed mid-run: the listener reported it and exited $lrc after ${dt} s"

# A listener killed mid-run: the client says so within its limit.
listen hostA "--timeout 200"
vm_ssh hostB "rm -f /tmp/pc.*; nohup sh -c 'gdrprov bench pair ${addr[hostA]} --device rxe0 --token-file /root/pair.token --size 1M --duration 120 --timeout 200; echo \$? > /tmp/pc.rc' > /tmp/pc.out 2>&1 < /dev/null &" >/dev/null
vm_ssh hostA "for i in \$(seq 120); do grep -q 'registered the test buffer' /tmp/pl.err && exit 0; sleep 0.5; done; exit 1" >/dev/null || fail "the session did not start"
sleep 5
t0=$(date +%s)
# shellcheck disable=SC2016 # the guest's shell expands it
vm_ssh hostA 'kill -9 $(pgrep -P $(cat /tmp/pl.shpid))'
vm_ssh hostB "for i in \$(seq 120); do [ -s /tmp/pc.rc ] && exit 0; sleep 0.5; done; exit 1" >/dev/null || fail "the client did not exit within 60 s of its listener's death"
dt=$(( $(date +%s) - t0 ))
cout=$(vm_ssh hostB "cat /tmp/pc.out; echo rc=\$(cat /tmp/pc.rc)")
printf '%s\n' "$cout" | sed 's/^/    client| /'
assert_not_contains "$cout" "rc=0" "the client of a killed listener fails"
assert_contains "$cout" "closed the connection" "the client reports its listener gone mid-run"
ok "listener killed mid-run: the client reported it after ${dt} s"
vm_ssh hostB 'pgrep -x gdrprov && exit 1 || exit 0' >/dev/null || fail "a gdrprov process is left in hostB"
vm_ssh hostA 'pgrep -x gdrprov && exit 1 || exit 0' >/dev/null || fail "a gdrprov process is left in hostA"
ok "no gdrprov process left in either guest"

# A lowered MTU on one guest: both ends name both MTUs.
vm_ssh hostB "ip link set ${nic[hostB]} mtu 1000 && for i in \$(seq 20); do ibv_devinfo -d rxe0 | grep -q 'active_mtu:.*512' && exit 0; sleep 0.5; done; ibv_devinfo -d rxe0; exit 1" >/dev/null ||
  fail "hostB: rxe0's active MTU did not follow the netdev MTU"
listen hostA
rc=0; out=$(vm_ssh hostB "gdrprov bench pair ${addr[hostA]} --device rxe0 --token-file /root/pair.token --size 64K --iters 5" 2>&1) || rc=$?
lrc=$(listener_done hostA 30)
lerr=$(vm_ssh hostA "cat /tmp/pl.err")
printf '%s\n' "$out" | sed 's/^/    client| /'
printf '%s\n' "$lerr" | tail -2 | sed 's/^/    listener| /'
{ [ "$rc" != 0 ] && [ "$lrc" != 0 ]; } || fail "an MTU mismatch did not fail both ends (client $rc, listener $lrc)"
for m in "$out" "$lerr"; do
  assert_contains "$m" "MTU mismatch" "MTU mismatch named"
  assert_contains "$m" "1024" "the MTU of hostA named"
  assert_contains "$m" "512" "the MTU of hostB named"
done
vm_ssh hostB "ip link set ${nic[hostB]} mtu 1500" >/dev/null
fi

# Speed: gdrprov pair against ib_write_bw between the same two guests (a figure, not an assertion).
# GDRPROV_VM_PAIR_SIZES: the sizes (default 64 KiB, 1 MiB, 8 MiB). GDRPROV_VM_PAIR_ALT_BIN=FILE: also compare another gdrprov binary (copied into both guests), after the
# installed one, in the same boot (an A/B of two builds; each against ib_write_bw, tools alternating).
if [ "${GDRPROV_VM_PAIR_SPEED:-1}" = 1 ]; then
  bins=(/usr/local/bin/gdrprov)
  if [ -n "${GDRPROV_VM_PAIR_ALT_BIN:-}" ]; then
    for h in hostA hostB; do
      vm_copy_in $h "$GDRPROV_VM_PAIR_ALT_BIN" /root/gdrprov-alt
      vm_ssh $h "chmod 755 /root/gdrprov-alt" >/dev/null
    done
    bins+=(/root/gdrprov-alt)
  fi
  for bin in "${bins[@]}"; do
    rc=0
    build=${GDRPROV_VM_BUILD:-of unknown build}
    [ "$bin" = /usr/local/bin/gdrprov ] || build="given as GDRPROV_VM_PAIR_ALT_BIN=$GDRPROV_VM_PAIR_ALT_BIN"
    RUN_A="ssh $(vm_ssh_opts hostA) root@127.0.0.1" RUN_B="ssh $(vm_ssh_opts hostB) root@127.0.0.1" \
      ROUNDS=${GDRPROV_VM_PAIR_ROUNDS:-2} RESULTS="$VM_RUN_DIR" BUILD="$build" \
      NOTE="VM scenario 17: two TCG guests ($VM_SMP vCPUs, $VM_MEM MiB each) on a qemu socket link, rxe0 in each; $bin" \
      bash "$VM_DIR/../../bench/compare-pair.sh" "$bin" rxe0 "${addr[hostA]}" "${GDRPROV_VM_BENCH_SECS:-3}" \
      "${GDRPROV_VM_PAIR_SIZES:-65536 1048576 8388608}" \
      > "$VM_RUN_DIR/17-compare-pair-$(basename "$bin").txt" 2>&1 || rc=$?
    sed 's/^/    bench| /' "$VM_RUN_DIR/17-compare-pair-$(basename "$bin").txt"
    [ "$rc" -le 1 ] || fail "bench/compare-pair.sh ($bin): exit $rc"
    ok "bench/compare-pair.sh ran with $bin (exit $rc)"
  done
fi

vm_poweroff hostA &
vm_poweroff hostB
wait
