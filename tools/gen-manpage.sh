#!/bin/bash
# Writes a manual page from a program's own --help and --version output, so
# that the page cannot drift from the help text (help2man).
#   gen-manpage.sh PROGRAM OUTPUT.1 [COMMAND]
# With COMMAND, the page is `PROGRAM COMMAND --help`, titled
# PROGRAM-COMMAND, its NAME line taken from the command list that
# `PROGRAM --help` prints ("  COMMAND   summary").
set -euo pipefail
prog=$1 out=$2 cmd=${3:-}
name=$(basename "$prog")
# a sanitizer build must not fail here on leaks in GTK at exit
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} NO_AT_BRIDGE=1 GSETTINGS_BACKEND=memory
inc=$(mktemp)
trap 'rm -f "$inc"' EXIT

if [ -n "$cmd" ]; then
  summary=$("$prog" --help | awk -v c="$cmd" '$1 == c { $1 = ""; sub(/^ +/, ""); print; exit }')
  if [ -z "$summary" ]; then
    echo "gen-manpage: '$name --help' does not list the command '$cmd'" >&2
    exit 1
  fi
  printf '[NAME]\n%s-%s \\- %s\n[SEE ALSO]\n.BR %s (1)\n' "$name" "$cmd" "$summary" "$name" >"$inc"
  help_option="$cmd --help"
else
  case $name in
    neurocuda)
      summary="convert trained networks into spiking neural networks, simulate them and report what the spikes do"
      see=$("$prog" --help | awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { printf ".BR %s-%s (1),\n", "neurocuda", $1 } on && /^$/ { on = 0 }')
      printf '[NAME]\n%s \\- %s\n[SEE ALSO]\n%s\n.BR neurocuda-workbench (1)\n' "$name" "$summary" "$see" >"$inc" ;;
    *)
      summary="the NeuroCUDA Workbench: convert, simulate and watch spiking neural networks"
      printf '[NAME]\n%s \\- %s\n[SEE ALSO]\n.BR neurocuda (1)\n' "$name" "$summary" >"$inc" ;;
  esac
  help_option="--help"
fi
help2man --no-info --locale=C.UTF-8 --section=1 --manual="NeuroCUDA Manual" --include="$inc" \
  --help-option="$help_option" --version-option=--version "$prog" --output="$out"
