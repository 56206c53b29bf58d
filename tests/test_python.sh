#!/bin/bash
# test_python.sh LIBNEUROCUDA — runs the Python package's tests (tests/python)
# with pytest, printing TAP so that meson counts them with the C tests.
#
# The tests import the INSTALLED package, as a user would: the package is
# installed from this tree (pip install --no-build-isolation ., offline) into
# BUILDDIR/python-env by tools/install-python.sh, which tools/test.sh runs
# before the suite; here it is run again, which only rebuilds what changed, so
# that the tests never see a stale install.  The source tree's python/ is not
# on the path, and the installed package loads the libneurocuda inside it.
# The environment sees Debian's numpy, pytest and (optionally) torch; tests
# that need torch skip themselves without it.  neurocuda.workbench() finds the
# workbench of BUILDDIR on PATH, as it would find an installed one.
set -u
builddir="$(dirname "$(dirname "$(realpath "$1")")")"   # LIB is BUILDDIR/lib/libneurocuda.so
src="${NC_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
if ! /usr/bin/python3 -c "import numpy, pytest, mesonpy" 2>/dev/null; then
    echo "1..0 # SKIP Debian's python3 lacks numpy, pytest or mesonpy (python3-numpy, python3-pytest, python3-mesonpy)"
    exit 0
fi
if ! install_out=$(bash "$src/tools/install-python.sh" "$builddir" 2>&1); then
    echo "Bail out! the package could not be installed: $(echo "$install_out" | tail -n 1)"
    echo "$install_out" | sed 's/^/# /'
    exit 1
fi
echo "# $install_out"
unset NEUROCUDA_LIB
export NC_SOURCE_DIR="$src" NC_BUILD_DIR="$builddir" NC_EXPECT_INSTALLED="$builddir/python-env"
export PYTHONPATH="$src/tests/python"   # the fixtures and the TAP plugin only
export PATH="$builddir/app:$PATH"
export PYTHONDONTWRITEBYTECODE=1
cd "$src/tests/python" || exit 1
exec "$builddir/python-env/bin/python" -m pytest -p no:terminal -p no:cacheprovider -p tap_plugin "$src/tests/python"
