#!/bin/bash
# test_python.sh LIBNEUROCUDA — runs the Python package's tests (tests/python)
# with pytest, printing TAP so that meson counts them with the C tests.
# Uses the system's python3 (Debian's python3-numpy, python3-pytest and,
# optionally, python3-torch); tests that need torch skip themselves without it.
set -u
lib="$(realpath "$1")"
src="${NC_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
python=""
for candidate in "${NC_PYTHON:-}" /usr/bin/python3 python3; do
    if [ -n "$candidate" ] && "$candidate" -c "import numpy, pytest" 2>/dev/null; then
        python="$candidate"
        break
    fi
done
if [ -z "$python" ]; then
    echo "1..0 # SKIP no python3 with numpy and pytest (Debian python3-numpy, python3-pytest)"
    exit 0
fi
export NEUROCUDA_LIB="$lib"
export PYTHONPATH="$src/tests/python:$src/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
cd "$src/tests/python" || exit 1
exec "$python" -m pytest -p no:terminal -p no:cacheprovider -p tap_plugin "$src/tests/python"
