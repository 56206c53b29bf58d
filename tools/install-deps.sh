#!/bin/bash
# Installs the Debian 12 packages NeuroCUDA Workbench needs, only those that
# are missing.  Run as root (or with sudo).  Debian packages only; nothing is
# downloaded from anywhere else.
set -euo pipefail

packages=(
  # build
  build-essential meson ninja-build pkg-config python3
  # core/: ONNX (protobuf-c + Debian's onnx.proto), HDF5 1.10, zlib, OpenBLAS
  protobuf-c-compiler libprotobuf-c-dev libonnx-dev libhdf5-dev zlib1g-dev libopenblas-dev
  # plots (cairo) and the GTK4 workbench
  libcairo2-dev libgtk-4-dev libadwaita-1-dev
  # data and test data
  dataset-fashion-mnist libonnx-testdata
  # tests: h5py reads our recordings; python3-onnx builds bad-input fixtures; Xvfb runs GUI tests
  python3-h5py python3-numpy python3-onnx xvfb xauth desktop-file-utils
  # tests: memcheck on the CLI end to end (tests/test_valgrind.sh)
  valgrind
  # install: manual pages written at build time from --help (help2man), and
  # tests/test_install.sh's checks of an install: `man -l` renders each page
  # (man-db), `appstreamcli validate` checks the AppStream metainfo (appstream)
  help2man man-db appstream
  # the Python package (python/neurocuda): pytest runs its tests inside `meson
  # test`; meson-python and pip install it offline from the source tree
  # (pip install --no-build-isolation .); it needs no compiled extension
  python3-pytest python3-mesonpy python3-pip
)
if [ "${NC_WITH_PACKAGING:-0}" = 1 ]; then
  # the Debian package and its test (meson test --suite package, which skips
  # itself without them): dpkg-buildpackage, debhelper's meson support, lintian
  packages+=(dpkg-dev debhelper fakeroot lintian)
fi
if [ "${NC_WITH_TORCH:-0}" = 1 ]; then
  # re-training the bundled models (tools/train_models.py), and the Python
  # package's tests on a torch network (they skip themselves without torch;
  # tools/test.sh asks for it unless NC_WITH_TORCH=0)
  packages+=(python3-torch)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} Debian packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
