#!/usr/bin/env bash
# The .deb and the .rpm in clean roots (issue 25's acceptance, docs/packages.md):
# - Debian 12: a minbase bookworm root made with mmdebstrap from this host's
#   apt sources (as tests/vm/image/build.sh does; cached as a tarball under
#   target/package/), `apt-get install ./gdrprov.deb` in it, then, from the
#   installed files (chroot): gdrprov doctor, apply rdma-dmabuf --root COPY,
#   the man page and completions, the trigger firing for a package that drops
#   a module under /lib/modules (a chroot: the re-check stands aside, the
#   install succeeds), remove and purge as documented.
# - the .rpm: rpm -qlp, rpm -qp --scripts, and rpm --root into a scratch root;
#   then rpm --root into the Debian root, where its scriptlets and its file
#   triggers run (a module package installed and removed).
# Needs root, mmdebstrap and rpm (scripts/ensure-packages.sh package).
#   bash scripts/package-test-root.sh target/debian/X.deb target/generate-rpm/X.rpm
set -uo pipefail
cd "$(dirname "$0")/.." || exit
deb=$(realpath "${1:?the .deb}") rpm=$(realpath "${2:?the .rpm}")
passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
check() { local what=$1; shift; if "$@" >/dev/null 2>&1; then ok "$what"; else bad "$what"; fi; }

work=$(mktemp -d /tmp/gdrprov-pkgroot.XXXXXX)
root=$work/root
cleanup() {
  for m in dev/pts dev sys proc; do umount -l "$root/$m" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

# 1. The clean root (only the image's packages), cached per day.
cache=target/package/bookworm-minbase.tar
if [ ! -s "$cache" ] || [ -n "$(find "$cache" -mmin +1440)" ]; then
  sources=/etc/apt/sources.list.d/debian.sources
  [ -f "$sources" ] || sources=/etc/apt/sources.list
  mkdir -p target/package
  { mmdebstrap --mode=root --variant=minbase --quiet bookworm "${cache%.tar}.tmp.tar" "$sources" &&
    mv "${cache%.tar}.tmp.tar" "$cache"; } || { echo "mmdebstrap failed"; echo "0 passed, 1 failed"; exit 1; }
fi
mkdir -p "$root" && tar -C "$root" -xf "$cache"
mount -t proc proc "$root/proc" && mount --rbind /sys "$root/sys" && mount --bind /dev "$root/dev" &&
  mount --bind /dev/pts "$root/dev/pts"
in_root() { chroot "$root" "$@"; }
cp "$deb" "$root/tmp/gdrprov.deb"

# 2. Install with apt from the file: no dependency beyond the root's own.
if in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/gdrprov.deb >"$work/apt.log" 2>&1; then
  ok "apt-get install ./gdrprov.deb in a clean bookworm minbase root"
else
  bad "apt-get install ./gdrprov.deb"; tail -20 "$work/apt.log"
fi
check "gdrprov --version runs from /usr/bin" in_root /usr/bin/gdrprov --version
in_root gdrprov doctor >"$work/doctor.log" 2>&1
rc=$?
if [ "$rc" = 0 ] || [ "$rc" = 3 ]; then ok "gdrprov doctor (exit $rc: findings, no error)"; else bad "gdrprov doctor exit $rc"; cat "$work/doctor.log"; fi
cp -a examples/hosts/ubuntu-22.04-h100 "$root/tmp/copy"
if in_root gdrprov apply rdma-dmabuf --root /tmp/copy --yes --no-exec >"$work/apply.log" 2>&1 &&
  grep -q 'install nvidia_peermem /bin/false' "$root/tmp/copy/etc/modprobe.d/gdrprov-blacklist.conf"; then
  ok "gdrprov apply rdma-dmabuf --root COPY (modprobe.d written in the copy)"
else
  bad "gdrprov apply rdma-dmabuf --root COPY"; tail -20 "$work/apply.log"
fi
check "man page: gdrprov(1)" sh -c "zcat '$root/usr/share/man/man1/gdrprov.1.gz' | grep -q '^.TH gdrprov'"
check "bash completion loads" in_root bash -c '. /usr/share/bash-completion/completions/gdrprov && complete -p gdrprov'
check "zsh and fish completions present" test -s "$root/usr/share/zsh/vendor-completions/_gdrprov" -a -s "$root/usr/share/fish/vendor_completions.d/gdrprov.fish"
check "systemd units present" test -s "$root/usr/lib/systemd/system/gdrprov-recheck.service" -a -s "$root/usr/lib/systemd/system/gdrprov-recheck.path"
check "path unit enabled" test -L "$root/etc/systemd/system/paths.target.wants/gdrprov-recheck.path"
check "dpkg knows the /lib/modules file trigger" grep -q '^/lib/modules gdrprov/noawait' "$root/var/lib/dpkg/triggers/File"
check "Ansible module symlink resolves to the binary" test "$(readlink -f "$root/usr/share/gdrprov/ansible/library/gdrprov")" = "$root/usr/bin/gdrprov"
# The alert rules and the dashboard (issue 36), where docs/monitoring.md says: the files of examples/,
# and the rules as Prometheus would load them from there.
monitoring_files() { # ROOT WHAT: the two files installed under ROOT, byte for byte those of examples/
  check "$2: /usr/share/gdrprov/prometheus/gdrprov-rules.yml is examples/prometheus/gdrprov-rules.yml" \
    cmp examples/prometheus/gdrprov-rules.yml "$1/usr/share/gdrprov/prometheus/gdrprov-rules.yml"
  check "$2: /usr/share/gdrprov/grafana/gdrprov.json is examples/grafana/gdrprov.json" \
    cmp examples/grafana/gdrprov.json "$1/usr/share/gdrprov/grafana/gdrprov.json"
}
monitoring_files "$root" "deb"
if command -v promtool >/dev/null; then
  check "promtool check rules on the installed rules" promtool check rules "$root/usr/share/gdrprov/prometheus/gdrprov-rules.yml"
else
  echo "note: no promtool on this host (Debian's prometheus: scripts/ensure-packages.sh test); the rules were compared, not loaded"
fi

# 3. A change applied to this root, so that the journal holds something.
printf 'name: site\nmodules:\n  absent: [nvidia_peermem]\n' >"$root/tmp/site.yaml"
check "apply a profile to the root itself (journal generation 1)" in_root gdrprov apply /tmp/site.yaml --yes --no-exec --no-reboot

# 4. A package dropping a module under /lib/modules fires the trigger; in a
# chroot the re-check stands aside and the install succeeds.
dummy=$work/dummy
mkdir -p "$dummy/DEBIAN" "$dummy/lib/modules/6.1.0-99-amd64/updates"
printf 'Package: gdrprov-dummy-kmod\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t.example>\nDescription: dummy module\n' >"$dummy/DEBIAN/control"
: >"$dummy/lib/modules/6.1.0-99-amd64/updates/gdrprov_dummy.ko"
dpkg-deb -b --root-owner-group "$dummy" "$root/tmp/dummy.deb" >/dev/null
if in_root dpkg -i /tmp/dummy.deb >"$work/dummy.log" 2>&1 && grep -q 'Processing triggers for gdrprov' "$work/dummy.log"; then
  ok "a package under /lib/modules fires gdrprov's trigger and installs"
else
  bad "dummy module package with the trigger"; cat "$work/dummy.log"
fi

# 5. remove keeps the journal and the configuration; purge keeps a journal of
# changes still applied (and says so), removes one with nothing applied.
in_root dpkg -r gdrprov >/dev/null 2>&1
check "remove: binary gone" test ! -e "$root/usr/bin/gdrprov"
check "remove: /var/lib/gdrprov kept" test -f "$root/var/lib/gdrprov/state.json"
check "remove: /etc/default/gdrprov kept (conffile)" test -f "$root/etc/default/gdrprov"
check "a kernel install after remove: the hook left behind does nothing" in_root /etc/kernel/postinst.d/zz-gdrprov 6.1.0-99-amd64
in_root dpkg -P gdrprov >"$work/purge.log" 2>&1
check "purge with changes applied: journal kept" test -f "$root/var/lib/gdrprov/state.json"
check "purge with changes applied: says why" grep -q 'kept /var/lib/gdrprov' "$work/purge.log"
check "purge: conffiles gone" test ! -e "$root/etc/default/gdrprov" -a ! -e "$root/etc/kernel/postinst.d/zz-gdrprov"
in_root dpkg -i /tmp/gdrprov.deb >/dev/null 2>&1
check "reinstall, rollback" in_root gdrprov rollback --yes --no-exec
in_root dpkg -P gdrprov >/dev/null 2>&1
check "purge with nothing applied: /var/lib/gdrprov removed" test ! -e "$root/var/lib/gdrprov"

# 6. The .rpm: file list, scriptlets, and an install into a scratch root.
rpm -qlp "$rpm" >"$work/rpm-files" 2>/dev/null
for f in /usr/bin/gdrprov /usr/share/man/man1/gdrprov.1.gz /usr/share/bash-completion/completions/gdrprov \
  /usr/lib/systemd/system/gdrprov-recheck.service /usr/lib/systemd/system/gdrprov-recheck.path \
  /usr/libexec/gdrprov/recheck-trigger /usr/lib/kernel/install.d/95-gdrprov.install /etc/sysconfig/gdrprov \
  /usr/share/licenses/gdrprov/LICENSE /usr/share/gdrprov/prometheus/gdrprov-rules.yml \
  /usr/share/gdrprov/grafana/gdrprov.json; do
  grep -qx "$f" "$work/rpm-files" || bad "rpm -qlp lacks $f"
done
ok "rpm -qlp lists the binary, man page, completions, units, hooks, config, licence, alert rules, dashboard"
rpm -qp --scripts "$rpm" >"$work/rpm-scripts" 2>/dev/null
if grep -q 'postinstall scriptlet' "$work/rpm-scripts" && grep -q 'preuninstall scriptlet' "$work/rpm-scripts" &&
  grep -q 'enable gdrprov-recheck.path' "$work/rpm-scripts"; then
  ok "rpm -qp --scripts: post (enable the path unit), preun, postun"
else
  bad "rpm -qp --scripts"; cat "$work/rpm-scripts"
fi
mkdir -p "$work/rpmroot"
if rpm --root "$work/rpmroot" --initdb && rpm --root "$work/rpmroot" -i --nodeps --noscripts "$rpm" >"$work/rpm.log" 2>&1 &&
  [ -x "$work/rpmroot/usr/bin/gdrprov" ] && "$work/rpmroot/usr/bin/gdrprov" --version >/dev/null; then
  ok "rpm --root SCRATCH -i (--nodeps --noscripts: the scratch root has no glibc or systemd)"
  monitoring_files "$work/rpmroot" "rpm"
  check "rpm --root -e removes it" rpm --root "$work/rpmroot" -e --noscripts gdrprov
else
  bad "rpm --root install"; cat "$work/rpm.log"
fi

# 7. The .rpm's file triggers, fired for real: rpm --root into the Debian
# root (it has /bin/sh, so the scriptlets run, chrooted), a change applied,
# then a package dropping a module under /lib/modules and its removal: each
# runs the re-check, which names the trigger (in a chroot it stands aside and
# says so, where /proc/1/root can be read: not in every container), and both
# transactions succeed.
if rpm -qp --filetriggers "$rpm" 2>/dev/null | grep -q 'transfiletriggerin.*-- /lib/modules, /usr/lib/modules'; then
  ok "rpm -qp --filetriggers: transfiletriggerin and -postun on /lib/modules, /usr/lib/modules"
else
  bad "rpm -qp --filetriggers"; rpm -qp --filetriggers "$rpm"
fi
if rpm --root "$root" --initdb && rpm --root "$root" -i --nodeps "$rpm" >"$work/rpm-deb.log" 2>&1 &&
  in_root gdrprov --version >/dev/null 2>&1; then
  ok "rpm --root DEBIAN-ROOT -i with its scriptlets (chrooted)"
else
  bad "rpm --root DEBIAN-ROOT -i"; cat "$work/rpm-deb.log"
fi
check "rpm: Ansible module link resolves to the binary" test "$(readlink -f "$root/usr/share/gdrprov/ansible/library/gdrprov")" = "$root/usr/bin/gdrprov"
check "rpm: apply a profile to the root (journal generation 1)" in_root gdrprov apply /tmp/site.yaml --yes --no-exec --no-reboot
# Where the re-check finds a profile that is not built in.
mkdir -p "$root/etc/gdrprov" && cp "$root/tmp/site.yaml" "$root/etc/gdrprov/site.yaml"
spec=$work/dummy-kmod.spec
printf '%s\n' 'Name: gdrprov-dummy-kmod' 'Version: 1' 'Release: 1' 'Summary: dummy module' 'License: MIT' \
  'BuildArch: noarch' '%description' 'dummy' '%install' \
  'mkdir -p %{buildroot}/lib/modules/6.1.0-99-amd64/updates' \
  'touch %{buildroot}/lib/modules/6.1.0-99-amd64/updates/gdrprov_dummy.ko' \
  '%files' '/lib/modules/6.1.0-99-amd64/updates/gdrprov_dummy.ko' >"$spec"
if rpmbuild -bb --quiet --define "_topdir $work/rpmtop" --define "_rpmdir $work/rpmtop" \
  --define "_build_name_fmt dummy.rpm" "$spec" >"$work/dummy-build.log" 2>&1; then
  rpm --root "$root" -i --nodeps "$work/rpmtop/dummy.rpm" >"$work/dummy-rpm.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ] && grep -q 'kernel modules installed (rpm file trigger)' "$work/dummy-rpm.log"; then
    ok "an rpm under /lib/modules fires gdrprov's file trigger and installs"
  else
    bad "dummy module rpm with the file trigger (exit $rc)"; cat "$work/dummy-rpm.log"
  fi
  rpm --root "$root" -e gdrprov-dummy-kmod >"$work/dummy-rpm-e.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ] && grep -q 'kernel modules removed (rpm file trigger)' "$work/dummy-rpm-e.log"; then
    ok "its removal fires the -postun trigger and succeeds"
  else
    bad "dummy module rpm removal (exit $rc)"; cat "$work/dummy-rpm-e.log"
  fi
else
  bad "rpmbuild of the dummy module package"; tail -20 "$work/dummy-build.log"
fi
check "rpm -e gdrprov" rpm --root "$root" -e gdrprov
check "rpm -e: /var/lib/gdrprov kept" test -f "$root/var/lib/gdrprov/state.json"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
