#!/bin/bash
# Configures (once) and builds NeuroCUDA Workbench into ./build.
# Extra arguments go to `meson setup` (e.g. -Dcuda=disabled).
set -euo pipefail
cd "$(dirname "$0")/.."
builddir=${NC_BUILDDIR:-build}
if [ ! -f "$builddir/build.ninja" ]; then
  meson setup "$builddir" "$@"
elif [ $# -gt 0 ]; then
  meson configure "$builddir" "$@"
fi
ninja -C "$builddir"
