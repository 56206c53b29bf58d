#!/bin/bash
# test_package.sh — builds the Debian package with `dpkg-buildpackage -us -uc`
# from a clean copy of the source tree, and checks the result: lintian (no
# errors), the files `dpkg -c` lists, `apt-get install --simulate` of the .deb
# on this system, and the programs of the unpacked package (`dpkg-deb -x`):
# the CLI runs `info` on the packaged model, the manual pages render, the
# workbench starts (under Xvfb) and finds its schema in the unpacked tree.
# Skips when dpkg-buildpackage, debhelper or a build dependency is missing.
# Slow (a whole build): meson suite 'package', `meson test -C build --suite package`.
# NC_DEB_BUILD_PROFILES=nocuda builds without the CUDA engine even where the
# toolkit is found.  The .deb, .changes and lintian's report stay in
# BUILD/package/.  TAP output.  Arguments: SOURCE_DIR BUILD_DIR
set -u
src=${1:?usage: test_package.sh SOURCE_DIR BUILD_DIR}
build=${2:?usage: test_package.sh SOURCE_DIR BUILD_DIR}
keep=$build/package
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; [ -f "$work/out" ] && sed 's/^/# /' "$work/out" | tail -n 30; }
skip_all() { echo "1..0 # SKIP $1"; exit 0; }
run() { # NAME COMMAND...
  local name=$1
  shift
  if "$@" >"$work/out" 2>&1; then ok "$name"; else not_ok "$name (exit $?)"; fi
}
has() { command -v "$1" >/dev/null 2>&1; }

has dpkg-buildpackage || skip_all "dpkg-buildpackage is not installed (Debian dpkg-dev)"
has dh || skip_all "debhelper is not installed"
(cd "$src" && dpkg-checkbuilddeps) >"$work/out" 2>&1 || skip_all "$(tail -n 1 "$work/out")"

# A copy of the tree without build outputs: what git tracks and what it does
# not ignore (uncommitted changes included), or everything but build dirs.
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
copy=$work/neurocuda-$version
mkdir -p "$copy"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$src" && git ls-files -z --cached --others --exclude-standard | grep -zv '^NOTE-' |
    tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$copy"
else
  tar -C "$src" --exclude='./build*' --exclude=./out -cf - . | tar -xf - -C "$copy"
fi

start=$(date +%s)
(cd "$copy" && DEB_BUILD_PROFILES="${NC_DEB_BUILD_PROFILES:-}" DEB_BUILD_OPTIONS="parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" \
  dpkg-buildpackage -us -uc) >"$work/build.log" 2>&1
rc=$?
mkdir -p "$keep"
cp "$work/build.log" "$keep/"
cp "$work/out" "$work/out.keep" 2>/dev/null
cp "$work/build.log" "$work/out"
if [ $rc -ne 0 ]; then not_ok "dpkg-buildpackage -us -uc (exit $rc; log in $keep/build.log)"; echo "1..$n"; exit 1; fi
ok "dpkg-buildpackage -us -uc ($(($(date +%s) - start)) s)"
deb=$(ls "$work"/neurocuda_*.deb 2>/dev/null | head -n 1)
changes=$(ls "$work"/neurocuda_*.changes 2>/dev/null | head -n 1)
if [ -z "$deb" ] || [ -z "$changes" ]; then not_ok "a .deb and a .changes were written"; echo "1..$n"; exit 1; fi
ok "wrote $(basename "$deb")"
rm -f "$keep"/*.deb "$keep"/*.changes
cp "$deb" "$changes" "$keep/"
cuda=no
grep -q "CUDA engine *: *\(YES\|True\)" "$work/build.log" && cuda=yes
echo "# CUDA engine in this package: $cuda"

# --- lintian -------------------------------------------------------------------
if has lintian; then
  lintian --fail-on error --info "$changes" >"$work/out" 2>&1
  rc=$?
  cp "$work/out" "$keep/lintian.txt"
  e=$(grep -c '^E:' "$work/out") w=$(grep -c '^W:' "$work/out")
  if [ $rc -eq 0 ] && [ "$e" = 0 ]; then ok "lintian: 0 errors ($w warnings)"; else not_ok "lintian: $e errors"; fi
else
  echo "# lintian is not installed: not run"
fi

# --- contents -------------------------------------------------------------------
dpkg -c "$deb" >"$work/contents"
for f in usr/bin/neurocuda usr/bin/neurocuda-workbench usr/share/neurocuda/models/fmnist_cnn.onnx \
  usr/share/applications/io.github.neurocuda.Workbench.desktop \
  usr/share/metainfo/io.github.neurocuda.Workbench.metainfo.xml \
  usr/share/glib-2.0/schemas/io.github.neurocuda.Workbench.gschema.xml \
  usr/share/icons/hicolor/scalable/apps/io.github.neurocuda.Workbench.svg \
  usr/share/man/man1/neurocuda.1.gz usr/share/man/man1/neurocuda-info.1.gz \
  usr/share/man/man1/neurocuda-workbench.1.gz usr/share/doc/neurocuda/copyright; do
  grep -q " \./$f\$" "$work/contents" && ok "dpkg -c: /$f" || { cp "$work/contents" "$work/out"; not_ok "dpkg -c: /$f"; }
done
# apt resolves the package's dependencies on this system (nothing is installed)
if has apt-get; then
  run "apt-get install --simulate ./$(basename "$deb")" apt-get install --simulate -q "$deb"
fi

# --- the unpacked package ---------------------------------------------------------
root=$work/root
run "dpkg-deb -x" dpkg-deb -x "$deb" "$root"
unset NC_SOURCE_DIR NC_BUILD_DIR NC_DATA_DIR
export NO_AT_BRIDGE=1 GSETTINGS_BACKEND=memory
run "unpacked neurocuda --version" "$root/usr/bin/neurocuda" --version
run "unpacked neurocuda info on the packaged model" "$root/usr/bin/neurocuda" info "$root/usr/share/neurocuda/models/fmnist_cnn.onnx"
grep -q "Conversion report" "$work/out" && ok "info prints the conversion report" || not_ok "info prints the conversion report"
run "unpacked neurocuda engines" "$root/usr/bin/neurocuda" engines
sed 's/^/# /' "$work/out"
if [ $cuda = yes ]; then
  # compiled in: "gpu  yes  yes|no  ..." (available only where a GPU is)
  grep -q "^gpu *yes" "$work/out" && ok "the GPU engine is compiled in" || not_ok "the GPU engine is compiled in"
fi
if has man; then
  for page in "$root"/usr/share/man/man1/*.1.gz; do
    MANWIDTH=80 man --warnings -l "$page" >/dev/null 2>"$work/out" && [ ! -s "$work/out" ] \
      && ok "man -l $(basename "$page")" || not_ok "man -l $(basename "$page")"
  done
fi
run "unpacked neurocuda-workbench --version" "$root/usr/bin/neurocuda-workbench" --version
if has xvfb-run; then
  # the package's trigger compiles the schemas on a real install; here by hand
  glib-compile-schemas "$root/usr/share/glib-2.0/schemas"
  timeout -s TERM 8 xvfb-run -a "$root/usr/bin/neurocuda-workbench" >"$work/out" 2>&1
  rc=$?
  if [ $rc -eq 124 ] && ! grep -qiE "critical|not installed" "$work/out"; then
    ok "the unpacked workbench starts and finds its schema beside it"
  else
    not_ok "the unpacked workbench starts and finds its schema beside it (exit $rc)"
  fi
fi

echo "1..$n"
[ $failed -eq 0 ]
