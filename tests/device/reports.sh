#!/bin/bash
# Issue 18's check on the GPU device machine (kernel booted directly by its hypervisor, no boot loader):
# plan, doctor and verify of every built-in profile give a report, not an error; apply --no-exec on an
# `inventory --snapshot` of the machine applies the rest of the profile and rolls back byte for byte.
#   bash tests/device/reports.sh [GDRPROV]     (run on the device machine, as root)
B=${1:-.devbin/gdrprov}
run() { echo; echo "\$ $*"; "$@"; echo "[exit $?]"; }
echo "== host"; uname -r; cat /proc/cmdline
for f in /etc/default/grub /boot/grub; do [ -e "$f" ] && echo "$f" || echo "$f: absent"; done
for p in $("$B" --format json profile list | python3 -c 'import json,sys; print(" ".join(x["name"] for x in json.load(sys.stdin)["profiles"]))'); do
  echo; echo "=================== $p"
  run "$B" plan "$p" --detailed-exitcode
  run "$B" doctor "$p"
  run "$B" verify "$p" --no-loopback
  "$B" --format json verify "$p" --no-loopback > /tmp/v.json; echo "[json exit $?]"
  python3 -c 'import json; r=json.load(open("/tmp/v.json")); print("json checks:", [(c["name"], c["status"]) for c in r["checks"]] if "checks" in r else r.get("error"))'
done
echo; echo "== snapshot, then apply --no-exec on it"
rm -rf /tmp/snap /tmp/snap.orig
run "$B" inventory --snapshot /tmp/snap
cp -a /tmp/snap /tmp/snap.orig
run "$B" apply rdma-dmabuf --root /tmp/snap --yes --no-exec
diff -r /tmp/snap /tmp/snap.orig > /dev/null && echo "refused apply left the snapshot byte for byte: yes"
run "$B" apply rdma-dmabuf --root /tmp/snap --yes --no-exec --boot-elsewhere
run "$B" plan rdma-dmabuf --root /tmp/snap --detailed-exitcode
run "$B" rollback --root /tmp/snap --yes --no-exec
# The journal stays (var/lib/gdrprov and the directories made for it); everything else must be as it was.
rm -rf /tmp/snap/var/lib/gdrprov; rmdir -p /tmp/snap/var/lib 2>/dev/null
diff -r /tmp/snap /tmp/snap.orig && echo "after rollback the snapshot is as it was (journal aside): yes"
