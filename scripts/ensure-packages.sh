#!/usr/bin/env bash
# Installs the Debian packages a step needs, only those missing, and says
# which and why on one line per step.
#   bash scripts/ensure-packages.sh build        # what `cargo build` needs
#   bash scripts/ensure-packages.sh build test   # plus the tools the tests drive
#   bash scripts/ensure-packages.sh package      # the package linters and test roots
#   bash scripts/ensure-packages.sh package-build  # what scripts/package.sh needs to build both
#   bash scripts/ensure-packages.sh slurm        # slurm-wlm's daemons and munge (tests/slurm)
# build: cmake and libclang (sideway's rdma-mummy-sys builds a small C shim
# with cmake and generates its bindings with bindgen; libibverbs itself is
# loaded at run time, not linked).
#
# For tests (tests/it/scripts.rs), two variables change where it looks and what
# it does; nobody else needs them:
#   ENSURE_PACKAGES_LIBDIR   the directory holding llvm-*/lib (default /usr/lib)
#   ENSURE_PACKAGES_DRY_RUN  1: print the line, install nothing, exit 0
set -euo pipefail

# bindgen (through clang-sys) loads the C library libclang: the unversioned
# links libclang.so / libclang-N.so come from libclang-N-dev, which also
# brings clang's own headers (stddef.h) that the bindings need.
# libclang-cpp.so.N (package libclang-cppN, the C++ library) is a different
# library that bindgen cannot use, and libclang-N.so.1 alone (libclang1-N)
# lacks the headers: neither counts.
has_libclang() {
  local dir=$1 lib
  for lib in "$dir"/llvm-*/lib/libclang.so "$dir"/llvm-*/lib/libclang-[0-9]*.so; do
    [ -e "$lib" ] && return 0
  done
  return 1
}

main() {
  local libdir=${ENSURE_PACKAGES_LIBDIR:-/usr/lib}
  local all=() lines=() components=() what
  for what in "$@"; do
    local need=() why
    case "$what" in
      build)
        why="the ibverbs binding's build needs them"
        command -v cmake >/dev/null || need+=(cmake)
        has_libclang "$libdir" || need+=(libclang-dev)
        command -v cc >/dev/null || need+=(gcc)
        ;;
      test)
        why="the tests drive them for real"
        command -v setpriv >/dev/null || need+=(util-linux)
        command -v grub-script-check >/dev/null || need+=(grub-common)
        command -v modprobe >/dev/null || need+=(kmod)
        command -v packer >/dev/null || need+=(packer)
        command -v systemd-analyze >/dev/null || need+=(systemd)
        command -v setpci >/dev/null || need+=(pciutils)
        command -v strace >/dev/null || need+=(strace)
        command -v python3 >/dev/null || need+=(python3)
        python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
        # tests/it/monitoring_*.rs: promtool tests the alert rules, a real
        # Prometheus scrapes a real node-exporter, Chromium loads the HTML report.
        command -v promtool >/dev/null || need+=(prometheus)
        command -v prometheus-node-exporter >/dev/null || need+=(prometheus-node-exporter)
        command -v chromium >/dev/null || need+=(chromium)
        command -v shellcheck >/dev/null || need+=(shellcheck)   # scripts/shellcheck.sh
        # tests/lints.rs runs cargo clippy on a scratch crate (a rustup component, not a package).
        cargo clippy --version >/dev/null 2>&1 || components+=(clippy)
        ;;
      package)
        # scripts/package.sh --lint and scripts/package-test-root.sh: the
        # distributions' linters, rpm (rpm -qp, rpm --root) and mmdebstrap
        # (a clean Debian root). cargo-deb and cargo-generate-rpm come from
        # crates.io (package.sh installs them with cargo install --locked).
        why="the packages are linted and installed for real"
        command -v lintian >/dev/null || need+=(lintian)
        command -v rpm >/dev/null || need+=(rpm)
        command -v rpmlint >/dev/null || need+=(rpmlint)
        command -v rpm2archive >/dev/null || need+=(rpm2cpio)
        command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
        command -v strip >/dev/null || need+=(binutils)
        ;;
      package-build)
        # scripts/package.sh itself: the .rpm is re-wrapped by RPM's own
        # builder (rpmbuild, rpm2archive: scripts/package-rpm-triggers.sh),
        # a --binary is stripped first.
        why="scripts/package.sh needs them: RPM's own tools for the .rpm; cc, libc headers and CA certificates to cargo install cargo-deb and cargo-generate-rpm"
        command -v rpmbuild >/dev/null || need+=(rpm)
        command -v rpm2archive >/dev/null || need+=(rpm2cpio)
        command -v strip >/dev/null || need+=(binutils)
        command -v gzip >/dev/null || need+=(gzip)
        # cargo install (cargo-deb, cargo-generate-rpm, when missing) fetches
        # from crates.io over TLS and links with cc (crt files from libc6-dev).
        if ! command -v cargo-deb >/dev/null || ! command -v cargo-generate-rpm >/dev/null; then
          [ -e /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
          command -v cc >/dev/null || need+=(gcc)
          [ -e /usr/include/stdio.h ] || need+=(libc6-dev)
        fi
        ;;
      slurm)
        why="tests/slurm/healthcheck.sh runs real Slurm daemons"
        command -v slurmctld >/dev/null || need+=(slurmctld)
        command -v slurmd >/dev/null || need+=(slurmd)
        command -v srun >/dev/null || need+=(slurm-client)
        command -v munged >/dev/null || need+=(munge)
        command -v jq >/dev/null || need+=(jq)
        command -v bc >/dev/null || need+=(bc)
        ;;
      *) echo "ensure-packages.sh: unknown set '$what' (use build, test, package, package-build, slurm)" >&2; return 1 ;;
    esac
    if ((${#need[@]})); then
      lines+=("${need[*]} ($why)")
      all+=("${need[@]}")
    fi
  done
  if ((${#components[@]})); then
    echo "ensure-packages.sh: installing rustup component ${components[*]} (tests/lints.rs runs cargo clippy)"
    if [ "${ENSURE_PACKAGES_DRY_RUN:-0}" != 1 ]; then
      rustup component add "${components[@]}" ||
        { echo "ensure-packages.sh: rustup component add ${components[*]} failed; install clippy" >&2; return 1; }
    fi
  fi
  ((${#all[@]})) || return 0
  local line
  for line in "${lines[@]}"; do echo "ensure-packages.sh: installing $line"; done
  [ "${ENSURE_PACKAGES_DRY_RUN:-0}" = 1 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "ensure-packages.sh: not root, so not installing; run: apt-get install ${all[*]}" >&2
    return 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  # Quiet, but apt's errors still reach the terminal.
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${all[@]}"
}

# Sourced by a test: define the functions only.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
