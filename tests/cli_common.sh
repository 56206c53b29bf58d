# cli_common.sh — what the CLI test scripts (test_cli*.sh) share; sourced,
# not run.  A work folder ($WORK, removed at exit), the TAP counters n and
# failed with ok / not_ok / skip, and expect, which runs a command and checks
# its exit code (a signal is always a failure).  Each script prints its own
# plan ("1..$n") at the end.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
n=0
failed=0

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; sed 's/^/# /' "$WORK/out" | tail -n 15; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }

# expect NAME EXIT-CODE COMMAND...: runs it, output in $WORK/out, checks the
# exit code (a number, or "nonzero"), and that a crash (signal) never happens.
expect() {
  local name=$1 want=$2
  shift 2
  "$@" >"$WORK/out" 2>&1
  local rc=$?
  if [ $rc -ge 128 ]; then not_ok "$name (killed by signal $((rc - 128)))"; return 1; fi
  if [ "$want" = nonzero ] && [ $rc -ne 0 ]; then ok "$name"; return 0; fi
  if [ "$rc" = "$want" ]; then ok "$name"; return 0; fi
  not_ok "$name (exit $rc, expected $want)"
  return 1
}
