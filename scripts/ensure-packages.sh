#!/usr/bin/env bash
# Installs the Debian packages a step needs, only those missing.
#   bash scripts/ensure-packages.sh build        # what `cargo build` needs
#   bash scripts/ensure-packages.sh build test   # plus the tools the tests drive
# build: cmake and libclang (sideway's rdma-mummy-sys builds a small C shim
# with cmake and generates its bindings with bindgen; libibverbs itself is
# loaded at run time, not linked).
set -euo pipefail
need=()
for what in "$@"; do
  case "$what" in
    build)
      command -v cmake >/dev/null || need+=(cmake)
      compgen -G '/usr/lib/llvm-*/lib/libclang*.so*' >/dev/null || need+=(libclang-dev)
      command -v cc >/dev/null || need+=(gcc)
      ;;
    test)
      command -v setpriv >/dev/null || need+=(util-linux)
      command -v grub-script-check >/dev/null || need+=(grub-common)
      command -v modprobe >/dev/null || need+=(kmod)
      command -v packer >/dev/null || need+=(packer)
      command -v systemd-analyze >/dev/null || need+=(systemd)
      command -v setpci >/dev/null || need+=(pciutils)
      command -v python3 >/dev/null || need+=(python3)
      python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
      ;;
    *) echo "ensure-packages.sh: unknown set '$what'" >&2; exit 1 ;;
  esac
done
((${#need[@]})) || exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages: ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
