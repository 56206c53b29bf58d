#!/bin/bash
# test_install.sh — `meson install` into a temporary DESTDIR, then checks what
# landed there as a distribution would: the files, desktop-file-validate,
# appstreamcli validate --no-net (0 errors), glib-compile-schemas --strict,
# every manual page rendered by `man -l` (one per command that
# `neurocuda --help` lists), the installed CLI running `info` on the
# installed bundled model, and the installed workbench starting from its
# menu entry (under Xvfb, when xvfb-run is there), and libneurocuda: the
# library with its soname, its header and pkg-config file, and a C program
# built against the installed copy through pkg-config.
# TAP output.  Arguments: BUILD_DIR PREFIX BINDIR DATADIR MANDIR HAVE_GUI HAVE_MAN [LIBDIR INCLUDEDIR]
set -u
build=${1:?usage: test_install.sh BUILD PREFIX BINDIR DATADIR MANDIR HAVE_GUI HAVE_MAN}
prefix=$2 bindir=$3 datadir=$4 mandir=$5 have_gui=$6 have_man=$7 libdir=${8:-} includedir=${9:-}
app_id=io.github.neurocuda.Workbench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dest=$work/dest
# absolute install paths (meson gives bindir etc. relative to the prefix)
abs() { case $1 in /*) echo "$1" ;; *) echo "$prefix/$1" ;; esac; }
bin=$dest$(abs "$bindir") share=$dest$(abs "$datadir") man=$dest$(abs "$mandir")
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; [ -f "$work/out" ] && sed 's/^/# /' "$work/out" | tail -n 20; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
run() { # NAME COMMAND...: ok when it exits 0; its output in $work/out
  local name=$1
  shift
  if "$@" >"$work/out" 2>&1; then ok "$name"; else not_ok "$name (exit $?)"; fi
}
has() { command -v "$1" >/dev/null 2>&1; }

# The installed programs must not lean on the source or build tree.
unset NC_SOURCE_DIR NC_BUILD_DIR NC_DATA_DIR
export NO_AT_BRIDGE=1 GSETTINGS_BACKEND=memory
# GTK's own leaks at exit are not ours (as in the other GUI tests)
gtk_asan=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0

run "meson install --destdir" meson install -C "$build" --no-rebuild --quiet --destdir "$dest"
if [ $failed -ne 0 ]; then echo "1..$n"; exit 1; fi

# --- the files ---------------------------------------------------------------
model=$share/neurocuda/models/fmnist_cnn.onnx
files=("$bin/neurocuda" "$model")
if [ "$have_gui" = true ]; then
  files+=("$bin/neurocuda-workbench" "$share/applications/$app_id.desktop" "$share/metainfo/$app_id.metainfo.xml"
    "$share/glib-2.0/schemas/$app_id.gschema.xml" "$share/icons/hicolor/scalable/apps/$app_id.svg"
    "$share/icons/hicolor/symbolic/apps/$app_id-symbolic.svg")
fi
for f in "${files[@]}"; do
  if [ -f "$f" ]; then ok "installed ${f#"$dest"}"; else not_ok "installed ${f#"$dest"} (missing)"; fi
done

# --- desktop entry, AppStream metainfo, GSettings schema --------------------
if [ "$have_gui" = true ]; then
  if has desktop-file-validate; then
    run "desktop-file-validate" desktop-file-validate "$share/applications/$app_id.desktop"
  else
    skip "desktop-file-validate" "not installed (Debian desktop-file-utils)"
  fi
  if has appstreamcli; then
    run "appstreamcli validate --no-net" appstreamcli validate --no-net "$share/metainfo/$app_id.metainfo.xml"
    # the metainfo, desktop entry and icon together, as software centres read them
    run "appstreamcli validate-tree --no-net" appstreamcli validate-tree --no-net "$dest$prefix"
  else
    skip "appstreamcli validate --no-net" "not installed (Debian appstream)"
  fi
  # compiled into the staging tree, as the post-install step does on a real install
  run "glib-compile-schemas --strict" glib-compile-schemas --strict "$share/glib-2.0/schemas"
else
  skip "desktop entry, metainfo and schema" "the workbench is not built"
fi

# --- manual pages ---------------------------------------------------------------
if [ "$have_man" = true ]; then
  pages=(neurocuda)
  for cmd in $("$bin/neurocuda" --help | awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { exit }'); do
    pages+=("neurocuda-$cmd")
  done
  [ "$have_gui" = true ] && pages+=(neurocuda-workbench)
  [ ${#pages[@]} -gt 5 ] && ok "neurocuda --help lists $((${#pages[@]} - 1)) commands" || not_ok "neurocuda --help lists its commands"
  for p in "${pages[@]}"; do
    page=$man/man1/$p.1
    if [ ! -f "$page" ]; then not_ok "man page $p(1) installed (missing)"; continue; fi
    if has man; then
      # rendered without groff warnings, titled after the page, and not empty
      MANWIDTH=80 man --warnings -l "$page" >"$work/page" 2>"$work/out"
      rc=$?
      if [ $rc -eq 0 ] && [ ! -s "$work/out" ] && grep -q "^$(echo "$p" | tr a-z A-Z)(1)" "$work/page" \
        && [ "$(grep -c . "$work/page")" -gt 6 ]; then
        ok "man -l $p.1"
      else
        cat "$work/page" >>"$work/out"; not_ok "man -l $p.1 (exit $rc)"
      fi
    else
      skip "man -l $p.1" "man is not installed (Debian man-db)"
    fi
  done
else
  skip "manual pages" "help2man was not found at build time (Debian help2man)"
fi

# --- the installed programs ---------------------------------------------------
run "installed neurocuda --version" "$bin/neurocuda" --version
run "installed neurocuda info on the installed bundled model" "$bin/neurocuda" info "$model"
grep -q "Conversion report" "$work/out" && ok "info prints the conversion report" || not_ok "info prints the conversion report"
"$bin/neurocuda" --help >"$work/out" 2>&1
grep -q "$(abs "$datadir")/neurocuda/models/fmnist_cnn.onnx" "$work/out" \
  && ok "neurocuda --help names the installed model" || not_ok "neurocuda --help names the installed model"

# --- libneurocuda ---------------------------------------------------------------
if [ -n "$libdir" ]; then
  lib=$dest$(abs "$libdir") inc=$dest$(abs "$includedir")
  for f in "$lib/libneurocuda.so.1" "$lib/libneurocuda.so" "$inc/neurocuda.h" "$lib/pkgconfig/neurocuda.pc"; do
    if [ -e "$f" ]; then ok "installed ${f#"$dest"}"; else not_ok "installed ${f#"$dest"} (missing)"; fi
  done
  if has pkg-config && has cc; then
    cat >"$work/use_lib.c" <<'C'
#include <neurocuda.h>
#include <stdio.h>
int main(void)
{
    neurocuda_model *m = NULL;
    neurocuda_error err = {0};
    int st = neurocuda_model_open("/nonexistent.onnx", &m, &err);
    printf("%s %d %s\n", neurocuda_version(), neurocuda_engine_count(), err.message);
    return st == NEUROCUDA_ERR_IO ? 0 : 1;
}
C
    flags=$(PKG_CONFIG_PATH=$lib/pkgconfig pkg-config --define-variable=prefix="$dest$prefix" --cflags --libs neurocuda)
    # a sanitizer build's library needs its runtime first in the program that loads it
    if ldd "$lib/libneurocuda.so.1" 2>/dev/null | grep -q libasan; then
      flags="$flags -fsanitize=address,undefined"
    fi
    run "a C program builds against the installed libneurocuda (pkg-config)" cc "$work/use_lib.c" -o "$work/use_lib" $flags
    run "it runs on the installed libneurocuda.so.1" env LD_LIBRARY_PATH="$lib" "$work/use_lib"
  else
    skip "a C program builds against the installed libneurocuda" "pkg-config or cc is missing"
  fi
fi

if [ "$have_gui" = true ]; then
  run "installed neurocuda-workbench --version" env ASAN_OPTIONS="$gtk_asan" "$bin/neurocuda-workbench" --version
  # The menu entry's command line, with the staging tree first on PATH and in
  # XDG_DATA_DIRS: the workbench must start, find its schema there and stay up.
  exec_line=$(sed -n 's/^Exec=//p' "$share/applications/$app_id.desktop" | sed 's/ *%[fFuU]//g')
  if has xvfb-run; then
    PATH=$bin:$PATH XDG_DATA_DIRS=$share:${XDG_DATA_DIRS:-/usr/local/share:/usr/share} ASAN_OPTIONS="$gtk_asan" \
      timeout -s TERM 8 xvfb-run -a $exec_line >"$work/out" 2>&1
    rc=$?
    # 124: still running when the timeout stopped it
    if [ $rc -eq 124 ] && ! grep -qiE "critical|not installed|error" "$work/out"; then
      ok "the menu entry's command starts the installed workbench"
    else
      not_ok "the menu entry's command starts the installed workbench (exit $rc)"
    fi
  else
    skip "the menu entry's command starts the installed workbench" "xvfb-run is not installed"
  fi
fi

echo "1..$n"
[ $failed -eq 0 ]
