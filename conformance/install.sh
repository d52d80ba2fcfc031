#!/usr/bin/env bash
# install.sh: prepare the host for the real-rxe conformance harness.
# Idempotent and non-interactive; quiet about what is already there.
#
#   1. Debian packages the harness runs on the host or copies into the guest:
#      qemu-system-x86 (the VMs), busybox-static (the guest's userland),
#      rdma-core, ibverbs-utils, rdmacm-utils and perftest (rping, ib_write_bw, for the CM captures), ibverbs-providers (libibverbs, the rxe
#      provider, `rdma`, ibv_* tools), libibverbs-dev (the headers the verbs
#      agent, conformance/agent/agent.c, is compiled against with the host's
#      cc at test time), librdmacm-dev (the same for the rdma_cm agent,
#      conformance/agent/cmagent.c), kmod (depmod/modprobe on the kernel
#      tree), cpio, xz-utils (unpacking the kernel image).
#   2. A Debian 6.1 kernel package, fetched with `apt-get download` and
#      unpacked with `dpkg-deb -x` into the cache (it is never installed),
#      then `depmod -b` on the tree: the .deb ships no modules.dep.
#
# Environment:
#   ROCESIM_CONFORMANCE_CACHE  cache dir (default $XDG_CACHE_HOME/rocesim-conformance,
#                              else ~/.cache/rocesim-conformance)
#   ROCESIM_CONFORMANCE_KPKG   kernel package (default linux-image-6.1.0-56-amd64,
#                              the one the lab measured; if the mirror no longer
#                              has it, the newest linux-image-6.1.0-N-amd64)
#
# Cache layout written here (read by conformance/vm.go):
#   $CACHE/kernel/             the unpacked .deb (boot/vmlinuz-*, lib/modules/*)
#   $CACHE/kernel/.package     "name version" of the unpacked package; its
#                              presence marks a complete unpack
set -euo pipefail

die() { echo "conformance/install.sh: $*" >&2; exit 1; }
say() { echo "conformance/install.sh: $*" >&2; }

CACHE=${ROCESIM_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rocesim-conformance}
KPKG=${ROCESIM_CONFORMANCE_KPKG:-linux-image-6.1.0-56-amd64}

if [ "$(id -u)" -eq 0 ]; then
  SUDO=
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO=sudo
else
  SUDO=no
fi
command -v apt-get >/dev/null 2>&1 || die "no apt-get on this host; the harness needs Debian (or Ubuntu) packages"

# --- 1. packages -----------------------------------------------------------
pkgs=(qemu-system-x86 busybox-static rdma-core ibverbs-utils ibverbs-providers libibverbs-dev librdmacm-dev iproute2 rdmacm-utils perftest kmod cpio xz-utils)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
updated=0
if [ ${#missing[@]} -gt 0 ]; then
  [ "$SUDO" = no ] && die "missing packages ${missing[*]}; installing them needs root (or passwordless sudo)"
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq || die "apt-get update failed"
  updated=1
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    die "apt-get install ${missing[*]} failed"
fi

# --- 2. kernel -------------------------------------------------------------
KDIR=$CACHE/kernel
if [ -f "$KDIR/.package" ]; then
  exit 0
fi
mkdir -p "$CACHE" || die "cannot create cache dir $CACHE"

# newest_kpkg prints the newest linux-image-6.1.0-N-amd64 the apt lists know.
newest_kpkg() {
  apt-cache pkgnames linux-image-6.1.0- 2>/dev/null |
    grep -E '^linux-image-6\.1\.0-[0-9]+-amd64$' | sort -V | tail -n 1
}

deb=$(ls "$CACHE"/"${KPKG}"_*.deb 2>/dev/null | head -n 1 || true)
if [ -z "$deb" ]; then
  # apt-get download as root warns that it runs unsandboxed; harmless.
  if ! (cd "$CACHE" && apt-get download -q "$KPKG" 2>/dev/null); then
    if [ "$updated" = 0 ] && [ "$SUDO" != no ]; then
      $SUDO apt-get update -qq || die "apt-get update failed"
    fi
    if ! (cd "$CACHE" && apt-get download -q "$KPKG" 2>/dev/null); then
      want=$KPKG
      KPKG=$(newest_kpkg)
      [ -n "$KPKG" ] || die "$want is not on the mirror and no linux-image-6.1.0-N-amd64 is"
      say "$want is not on the mirror; using $KPKG"
      (cd "$CACHE" && apt-get download -q "$KPKG") || die "apt-get download $KPKG failed"
    fi
  fi
  deb=$(ls "$CACHE"/"${KPKG}"_*.deb 2>/dev/null | head -n 1 || true)
  [ -n "$deb" ] || die "apt-get download $KPKG left no .deb in $CACHE"
fi

say "unpacking $(basename "$deb") into $KDIR"
rm -rf "$KDIR" "$KDIR.tmp"
mkdir -p "$KDIR.tmp"
dpkg-deb -x "$deb" "$KDIR.tmp" || die "dpkg-deb -x $deb failed"
kv=$(ls "$KDIR.tmp/lib/modules" 2>/dev/null | head -n 1)
[ -n "$kv" ] || die "$deb holds no lib/modules/<version>"
[ -f "$KDIR.tmp/lib/modules/$kv/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko" ] ||
  die "$deb has no rdma_rxe.ko"
depmod -b "$KDIR.tmp" "$kv" || die "depmod -b $KDIR.tmp $kv failed"
printf '%s %s\n' "$(dpkg-deb -f "$deb" Package)" "$(dpkg-deb -f "$deb" Version)" > "$KDIR.tmp/.package"
mv "$KDIR.tmp" "$KDIR"
say "kernel $kv ready in $KDIR"
