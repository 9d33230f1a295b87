#!/usr/bin/env bash
# Seconds: 23
# Scenario: doctor and inventory --snapshot in the guest; the snapshot, copied out and replayed with --root on
# the host, gives the same answers
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
vm_trap
require_gdrprov doctor
require_gdrprov inventory -- --snapshot

g=$(vm_shared)
out=$VM_RUN_DIR/08-snapshot
rm -rf "$out"; mkdir -p "$out"

rc=0; vm_ssh "$g" "gdrprov doctor" > "$out/doctor.guest.txt" 2>&1 || rc=$?
sed 's/^/    doctor| /' "$out/doctor.guest.txt"
info "doctor exit $rc"
[ -s "$out/doctor.guest.txt" ] || fail "doctor printed nothing"
vm_ssh "$g" "gdrprov inventory --format json" > "$out/inventory.guest.json" || fail "inventory --format json failed in the guest"
python3 -m json.tool "$out/inventory.guest.json" >/dev/null || fail "inventory --format json is not JSON"
ok "doctor and inventory ran in the guest"

# The facts to compare with the replay are those of the run that recorded the snapshot: a separate run sees
# a kernel ring buffer that has grown since (kernel_events counts its lines).
vm_ssh "$g" "rm -rf /root/snap && gdrprov inventory --snapshot /root/snap --format json" > "$out/inventory.snaprun.json" ||
  fail "inventory --snapshot failed"
vm_copy_out "$g" /root/snap "$out"
info "snapshot: $(find "$out/snap" -type f | wc -l) files, $(du -sh "$out/snap" | cut -f1)"

"$GDRPROV_BIN" inventory --root "$out/snap" --format json > "$out/inventory.replay.json" || fail "inventory --root on the host failed"
# Only what says where the facts came from may differ: /root, /facts/live, /facts/snapshot.
norm() {
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["facts"]
for k in ("live", "snapshot"):
    d.pop(k, None)
print(json.dumps(d, indent=1, sort_keys=True))' "$1"
}
snapflag=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["facts"].get("snapshot"))' "$out/inventory.replay.json")
[ "$snapflag" = True ] || fail "the replayed inventory does not say it comes from a snapshot"
if ! diff -u <(norm "$out/inventory.snaprun.json") <(norm "$out/inventory.replay.json") > "$out/inventory.diff"; then
  head -40 "$out/inventory.diff"; fail "inventory replayed from the snapshot differs from the guest's"
fi
ok "inventory --root SNAPSHOT on the host = the facts of the guest's snapshot run (all but live/snapshot)"

rc2=0; "$GDRPROV_BIN" doctor --root "$out/snap" > "$out/doctor.replay.txt" 2>&1 || rc2=$?
[ "$rc2" = "$rc" ] || fail "doctor exit: guest $rc, replay $rc2"
# The replay's suggested commands carry its --root (`gdrprov doctor X --root SNAP`); nothing else may differ.
diff -u "$out/doctor.guest.txt" <(sed "s| --root $out/snap||g" "$out/doctor.replay.txt") > "$out/doctor.diff" || {
  head -40 "$out/doctor.diff"; fail "doctor replayed from the snapshot differs from the guest's"; }
ok "doctor --root SNAPSHOT on the host = doctor in the guest"
