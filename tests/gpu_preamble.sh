# gpu_preamble.sh — sourced first by every tests/cli_gpu_*.sh: T is the tailor binary
# (TAILOR_BIN), the script is skipped (exit 77, what ctest counts as skipped) without a live GPU,
# $tmp is a temporary folder removed at exit, fail=0, and `check WHAT CMD...` runs CMD and, when
# it fails, prints "FAILED: WHAT" and sets fail=1.
T=${TAILOR_BIN:?}
if ! "$T" devices --json 2>/dev/null |
     python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["devices"] else 1)'; then
  echo "skipped: no live GPU"; exit 77
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() { local what=$1; shift; if "$@"; then :; else echo "FAILED: $what"; fail=1; fi; }
