#!/bin/sh
# guest-run.sh CMD...: runs CMD in the guest and streams, every 0.5 s while it runs, "T" and the names of the
# processes of interest that are running (gdrprov, update-grub, update-initramfs, kernel-install, cp, ...), so
# that the host, which cuts the power at an instant of its choosing, knows what the cut interrupted. Then CMD's
# output, each line as "O LINE", and "RC STATUS". CMD's output goes to /run (tmpfs), not to the disk under test.
"$@" > /run/gdrprov-pc.out 2>&1 &
p=$!
while kill -0 "$p" 2>/dev/null; do
  # /proc/*/comm with one cat: ps costs seconds of a loaded TCG guest per look.
  echo "T $(cat /proc/[0-9]*/comm 2>/dev/null | grep -xE 'gdrprov|update-.*|grub-.*|[a-z]*initramfs|cpio|zstd|gzip|depmod|kernel-install|bootctl|install|cp|mv|sync|systemctl|modprobe|rmmod|[0-9][0-9][-_].*|zz-.*|dracut|ukify|ldconfig' | sort -u | tr '\n' ' ')"
  sleep 0.5
done
wait "$p"; rc=$?
sed 's/^/O /' /run/gdrprov-pc.out
echo "RC $rc"
