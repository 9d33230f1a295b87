#!/usr/bin/env bash
# Adds to the .rpm that cargo-generate-rpm made what its configuration has no
# key for, by re-wrapping it with rpmbuild (RPM's own builder, Debian's `rpm`
# package):
# - the file triggers on /lib/modules and /usr/lib/modules
#   (%transfiletriggerin, %transfiletriggerpostun): the re-check when any
#   package installs or removes kernel modules, as the .deb's dpkg trigger;
# - the Ansible module's link /usr/share/gdrprov/ansible/library/gdrprov ->
#   /usr/bin/gdrprov (cargo-generate-rpm makes no symlinks).
# Everything else is taken from the package itself, so Cargo.toml stays the
# one home of the file list: the payload (files, modes, owners, %config and
# %doc flags), the header (name, version, release, summary, licence,
# description), the requirements and weak dependencies, and the scriptlets.
# scripts/package-test-root.sh compares the two file lists.
#
#   bash scripts/package-rpm-triggers.sh target/generate-rpm/X.rpm   # replaces X.rpm
set -euo pipefail
in=$(realpath "${1:?the .rpm cargo-generate-rpm made}")
cd "$(dirname "$0")/.."
for tool in rpmbuild rpm2archive; do
  command -v "$tool" >/dev/null ||
    { echo "package-rpm-triggers: $tool missing: bash scripts/ensure-packages.sh package" >&2; exit 1; }
done
work=$(mktemp -d /tmp/gdrprov-rpmwrap.XXXXXX)
trap 'rm -rf "$work"' EXIT

q() { rpm -qp --qf "$1" "$in" 2>/dev/null; }
name=$(q '%{NAME}') version=$(q '%{VERSION}') release=$(q '%{RELEASE}') arch=$(q '%{ARCH}')
# The packager and changelog entry: the maintainer the .deb names (Cargo.toml).
packager=$(sed -n 's/^maintainer = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
[ -n "$packager" ] || packager="gdrprov maintainers"

# The payload, as cargo-generate-rpm laid it out.
mkdir -p "$work/stage"
cp "$in" "$work/in.rpm"
rpm2archive -n "$work/in.rpm" >/dev/null # writes in.rpm.tar beside it
tar -C "$work/stage" -xf "$work/in.rpm.tar"
rm -f "$work/in.rpm" "$work/in.rpm.tar"

# One spec line per file: %attr, %config(noreplace), %doc as the package had them.
files_section() {
  rpm -qp --qf '[%{FILEFLAGS:fflags}|%{FILEMODES:octal}|%{FILEUSERNAME}|%{FILEGROUPNAME}|%{FILENAMES}\n]' "$in" |
    while IFS='|' read -r flags mode user group path; do
      local tags=""
      case "$flags" in *c*n* | *n*c*) tags="%config(noreplace) " ;; *c*) tags="%config " ;; esac
      case "$flags" in *d*) tags+="%doc " ;; esac
      printf '%%attr(%s,%s,%s) %s%s\n' "${mode: -4}" "$user" "$group" "$tags" "$path"
    done
}
deps() { # deps TAG QUERY: one "TAG: dep" line per dependency, rpmlib() and config() left to rpmbuild
  rpm -qp "$2" "$in" 2>/dev/null | grep -v -e '^rpmlib(' -e '^config(' | sort -u | sed "s|^|$1: |" || true
}
scriptlet() { # scriptlet SECTION TAG: the package's own scriptlet, if it has one
  local body
  body=$(q "%{$2}")
  [ -n "$body" ] && [ "$body" != "(none)" ] && printf '%%%s\n%s\n\n' "$1" "$body"
  return 0
}

cat >"$work/$name.spec" <<EOF
Name: $name
Version: $version
Release: $release
Summary: $(q '%{SUMMARY}')
License: $(q '%{LICENSE}')
Group: System Environment/Base
Packager: $packager
AutoReqProv: no
$(deps Requires --requires)
$(deps Recommends --recommends)
$(deps Suggests --suggests)

%description
$(q '%{DESCRIPTION}')

%install
cp -a "$work/stage/." "%{buildroot}/"
mkdir -p "%{buildroot}/usr/share/gdrprov/ansible/library"
ln -s ../../../../bin/gdrprov "%{buildroot}/usr/share/gdrprov/ansible/library/gdrprov"

$(scriptlet pre PREIN)
$(scriptlet post POSTIN)
$(scriptlet preun PREUN)
$(scriptlet postun POSTUN)
%transfiletriggerin -- /lib/modules /usr/lib/modules
# Once per transaction that installs kernel modules (drivers, OFED, kmod
# packages, kernels), after it; never fails, never blocks for long.
cat >/dev/null 2>&1 || :
/usr/libexec/gdrprov/recheck-trigger "kernel modules installed (rpm file trigger)" || :

%transfiletriggerpostun -- /lib/modules /usr/lib/modules
/usr/libexec/gdrprov/recheck-trigger "kernel modules removed (rpm file trigger)" || :

%changelog
* $(LC_ALL=C date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" '+%a %b %d %Y') $packager - $version-$release
- Built by scripts/package.sh from gdrprov $version (changes: the project's git log).

%files
$(files_section)
%dir /usr/libexec/gdrprov
%dir /usr/share/gdrprov
%dir /usr/share/gdrprov/ansible
%dir /usr/share/gdrprov/ansible/library
/usr/share/gdrprov/ansible/library/gdrprov
EOF

mkdir -p "$work/top" "$work/rpms"
# No brp scripts: the binary is packaged as built (package.sh strips it), no
# debuginfo split, no build-id links (the .deb has none either).
if ! rpmbuild -bb --quiet --target "$arch" \
  --define "_topdir $work/top" --define "_rpmdir $work/rpms" \
  --define "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" \
  --define "__os_install_post %{nil}" --define "__arch_install_post %{nil}" \
  --define "debug_package %{nil}" --define "_build_id_links none" \
  --define "_binary_payload w19.zstdio" \
  --buildroot "$work/buildroot" "$work/$name.spec" >"$work/rpmbuild.log" 2>&1; then
  echo "package-rpm-triggers: rpmbuild failed:" >&2
  tail -n 30 "$work/rpmbuild.log" >&2
  exit 1
fi
out=$work/rpms/$name-$version-$release.$arch.rpm
[ -f "$out" ] || { echo "package-rpm-triggers: rpmbuild made no $out" >&2; exit 1; }
mv "$out" "$in"
echo "package-rpm-triggers: $in (file triggers on /lib/modules, /usr/lib/modules; the Ansible module link)"
