#!/bin/sh
# guest-watch.sh EVENT LIMIT: waits in the guest for EVENT, then writes "gdrprov-pc-event: EVENT" to the
# kernel log, which the serial console carries to the host, and exits. In the running kernel's directory on
# the ESP (/boot/efi/MACHINE-ID/VERSION, where the loader entry loads the initrd from):
#   tmp         a gdrprov temporary file (.NAME.gdrprov-PID.tmp) is there: gdrprov is writing its copy of
#               the rebuilt initrd (not the copy it holds the entry on, .NAME.gdrprov-held.gdrprov-PID.tmp)
#   renamed     one that was there is gone: renamed over the initrd (or removed)
# In gdrprov's state dir (any boot loader):
#   gen-staged  a generation is being made (generations/.N.new: its backups and journal are being written,
#               nothing in the root has changed yet)
# It spins on shell builtins only (a glob per look, no process started): a look takes well under a
# millisecond, where a look with ls or sleep costs several on a TCG guest. Gives up after LIMIT seconds
# (checked every 20000 looks), exit 1.
ev=$1 limit=${2:-900}
if [ "$ev" = gen-staged ]; then
  d=/var/lib/gdrprov/generations pat='.*.new' ev_on=gen-staged
else
  d=/boot/efi/$(cat /etc/machine-id)/$(uname -r) pat=".initrd.img-$(uname -r).gdrprov-[0-9]*.tmp" ev_on=tmp
  [ -d "$d" ] || { echo "guest-watch: no $d" >&2; exit 2; }
fi
end=$(( $(date +%s) + limit )) seen='' n=0
while :; do
  # shellcheck disable=SC2086
  set -- "$d"/$pat
  if [ -e "$1" ]; then
    [ "$ev" = "$ev_on" ] && break
    seen=1
  elif [ -n "$seen" ]; then
    break
  fi
  n=$((n + 1))
  if [ $n -ge 20000 ]; then
    n=0
    [ "$(date +%s)" -lt "$end" ] || exit 1
  fi
done
echo "<2>gdrprov-pc-event: $ev" > /dev/kmsg
