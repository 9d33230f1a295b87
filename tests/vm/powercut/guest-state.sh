#!/bin/sh
# guest-state.sh: what the boot depends on, one "KEY=VALUE" line each, VALUE a short sha256 of the file or
# "absent": GRUB's /etc/default/grub and grub.cfg, or systemd-boot's /etc/kernel/cmdline and every loader
# entry on the ESP; gdrprov's modprobe.d files; each initramfs as "LISTING-SHA/rcSTATUS/N" from lsinitramfs
# (the sorted listing, its exit status, the number of entries), for systemd-boot also the copy on the ESP
# that the entry loads. A boot file gdrprov holds on a copy of its initramfs while it rebuilds it (issue 37:
# its initrd line names NAME.gdrprov-held) is summed as if it named NAME, the line it boots is the same; the
# initramfs it loads is listed as it is, and a line "held FILE" (no "=": not a key of the state) says so.
ver=$(uname -r)
sum() { if [ -f "$1" ]; then sed 's/\.gdrprov-held\([[:space:]]\|$\)/\1/' "$1" | sha256sum | cut -c1-16; else echo absent; fi; }
held() { grep -q '\.gdrprov-held' "$1" 2>/dev/null && echo "held $1"; }
listing() {
  if [ -f "$1" ]; then
    l=$(lsinitramfs "$1" 2>/dev/null); rc=$?
    echo "$(printf '%s\n' "$l" | sort | sha256sum | cut -c1-16)/rc$rc/$(printf '%s\n' "$l" | wc -l)"
  else echo absent; fi
}
if [ -d /boot/efi/loader ]; then
  echo "kernel-cmdline=$(sum /etc/kernel/cmdline)"
  E=/boot/efi/loader/entries
  for f in "$E"/*.conf; do [ -e "$f" ] && echo "entry:$(basename "$f")=$(sum "$f")" && held "$f"; done
  k="$E/$(cat /etc/machine-id)-$ver.conf"
  i=$(awk '$1 == "initrd" { print $2; exit }' "$k" 2>/dev/null)
  echo "initrd-on-esp=$(if [ -n "$i" ]; then listing "/boot/efi$i"; else echo no-initrd-line; fi)"
else
  echo "grub-defaults=$(sum /etc/default/grub)"
  echo "grub.cfg=$(sum /boot/grub/grub.cfg)"
  held /boot/grub/grub.cfg
fi
echo "modprobe.d=$(cat /etc/modprobe.d/gdrprov* 2>/dev/null | sha256sum | cut -c1-16)"
echo "initrd=$(listing "/boot/initrd.img-$ver")"
