#!/usr/bin/env bash
# install-deps.sh: install the system tools rocesim's tests use, from
# Debian's packages, if they are missing. Idempotent; quiet when all is there.
#
#   tshark    dissects our frames and the real rxe captures (wire, capture, inspect tests)
#   chromium  renders the SVG ladder to PNG headless (ladder/)
#   gcc, libibverbs-dev, ibverbs-utils, python3-pyverbs
#             build the drop-in libibverbs.so.1 (cgo) and the C programs its
#             tests run on it, against rdma-core's headers; ibv_devices,
#             ibv_devinfo and a pyverbs program run on it unmodified
#             (dropin/ibverbs)
#   perftest  ib_send_bw, ib_write_bw, ... run unmodified on it, two processes
#             through rocesim exec (cmd/rocesim)
#   librdmacm-dev, rdmacm-utils
#             build the drop-in librdmacm.so.1 against <rdma/rdma_cma.h>
#             (dropin/rdmacm); rping, udaddy, rdma_server/rdma_client run
#             unmodified on it (cmd/rocesim)
#
# and then runs conformance/install.sh (QEMU, rdma-core, busybox and a
# Debian kernel for the real-rxe harness) when it can install packages.
#
# Without root (and without sudo) it says what is missing and returns 0:
# the tests that need a tool then skip locally, and fail in CI (CI=true).
set -euo pipefail

need=()
command -v tshark >/dev/null 2>&1 || need+=(tshark)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 ||
  command -v google-chrome >/dev/null 2>&1 || need+=(chromium)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
[ -f /usr/include/infiniband/verbs.h ] || need+=(libibverbs-dev)
command -v ibv_devinfo >/dev/null 2>&1 || need+=(ibverbs-utils)
command -v ib_write_bw >/dev/null 2>&1 || need+=(perftest)
[ -f /usr/include/rdma/rdma_cma.h ] || need+=(librdmacm-dev)
command -v rping >/dev/null 2>&1 || need+=(rdmacm-utils)
/usr/bin/python3 -c 'import pyverbs' >/dev/null 2>&1 || need+=(python3-pyverbs)

if [ "$(id -u)" -eq 0 ]; then
  SUDO=
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO=sudo
else
  [ ${#need[@]} -gt 0 ] && echo "install-deps: missing ${need[*]}; install them with apt-get (needs root). Tests that need them will skip (fail under CI=true)." >&2
  echo "install-deps: not root: the real-rxe conformance test skips unless conformance/install.sh has run (it fails under CI=true)." >&2
  exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
# conformance prepares the real-rxe harness; outside CI a failure there
# only costs the conformance test (which then skips).
conformance() {
  if "$here/../conformance/install.sh"; then return 0; fi
  [ "${CI:-}" = true ] && exit 1
  echo "install-deps: conformance/install.sh failed; the real-rxe conformance test will skip" >&2
}
if [ ${#need[@]} -eq 0 ]; then
  conformance
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: missing ${need[*]} and no apt-get here; install them by hand." >&2
  exit 0
fi

echo "install-deps: installing ${need[*]} from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
# wireshark-common asks whether non-root users may capture; answer no.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections 2>/dev/null || true
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
conformance
