#!/bin/bash
# Installs the `neurocuda` Python package from this source tree into a
# virtual environment inside the build directory, offline, the way a user
# would (`pip install --no-build-isolation .`, Debian's python3-mesonpy):
#   BUILDDIR/python-env     the environment (it sees Debian's numpy, pytest,
#                           torch: --system-site-packages); python-env/bin/python
#                           imports the installed package
#   BUILDDIR/python-wheel   meson-python's build directory, kept so that a
#                           second install only recompiles what changed
# Nothing is fetched: --no-index, and every dependency is a Debian package.
# The wheel's CUDA setting follows BUILDDIR's (so it has the GPU engine
# exactly when the program built there has).
#   tools/install-python.sh [BUILDDIR]      (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
builddir=$(realpath -m "${1:-build}")
python=/usr/bin/python3   # Debian's, whose dist-packages hold mesonpy, numpy, pytest
env="$builddir/python-env"
log="$builddir/python-install.log"
mkdir -p "$builddir"

cuda=disabled
if grep -q '^#define NC_HAVE_CUDA 1' "$builddir/nc_config.h" 2>/dev/null; then
  cuda=enabled   # BUILDDIR compiled the CUDA engine
fi

if [ ! -x "$env/bin/python" ]; then
  # --without-pip: Debian's pip (python3-pip) is seen through the system site
  "$python" -m venv --system-site-packages --without-pip "$env"
fi
if ! "$env/bin/python" -m pip install --no-build-isolation --no-index --force-reinstall --no-deps --no-cache-dir \
    --config-settings=builddir="$builddir/python-wheel" \
    --config-settings=setup-args=-Dcuda="$cuda" . >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "install-python: pip install failed (whole log: $log)" >&2
  exit 1
fi
# the installed package, not this tree, must be what the environment imports
where=$(cd / && "$env/bin/python" -c "import neurocuda, sys; sys.stdout.write(neurocuda.__file__)")
case $where in
  "$env"/*) echo "install-python: neurocuda $(cd / && "$env/bin/python" -c 'import neurocuda; print(neurocuda.__version__)') installed in $env" ;;
  *) echo "install-python: the environment imports neurocuda from $where, not from $env" >&2; exit 1 ;;
esac
