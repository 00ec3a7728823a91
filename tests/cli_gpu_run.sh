#!/usr/bin/env bash
# cli_gpu_run.sh — first boot then a warm start, on a live GPU (issue 7, item 5): `tailor tune
# --model` tunes every kernel shape the runtime will launch (the list is the runtime's own dry
# pass), after which `tailor run` with TAILOR_NO_COMPILE=1 compiles nothing: prompts shorter
# than a chunk, longer than one (chunks with history), a 16-bit and a W4A16 checkpoint, and a
# 16-bit checkpoint quantized on load.
set -u
T=${TAILOR_BIN:?}
S=${TAILOR_SOURCE_DIR:?}
if ! "$T" devices --json 2>/dev/null | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["devices"] else 1)'; then
  echo "skipped: no live GPU"; exit 77
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() { local what=$1; shift; if "$@"; then :; else echo "FAILED: $what"; fail=1; fi; }

for fx in e2b_flat e2b_w4a16_asym; do
  M=$S/tests/fixtures/$fx
  check "tune --model $fx" "$T" tune --model "$M" --cache "$tmp/c.db"
  for ids in 2,17,33 2,17,33,5,9,11,40,41,42,43,44,45,46; do
    out=$(TAILOR_NO_COMPILE=1 "$T" run --model "$M" --ids "$ids" --max-tokens 6 --print-ids \
          --cache "$tmp/c.db" 2>&1); rc=$?
    check "warm run of $fx with prompt $ids compiles nothing (rc=$rc: $(tail -1 <<<"$out"))" \
      test $rc -eq 0
    check "$fx prints 6 ids" grep -qE '^([0-9]+,){5}[0-9]+' <<<"$out"
  done
done
out=$(TAILOR_NO_COMPILE=1 "$T" run --model "$S/tests/fixtures/e2b_flat" --quantize w4a16 \
      --ids 2,17,33 --max-tokens 4 --print-ids --cache "$tmp/c.db" 2>&1); rc=$?
check "warm run quantized on load compiles nothing (rc=$rc: $(tail -1 <<<"$out"))" test $rc -eq 0
# and the guard itself: an empty cache under TAILOR_NO_COMPILE=1 fails, naming the variable
if TAILOR_NO_COMPILE=1 "$T" run --model "$S/tests/fixtures/e2b_flat" --ids 2,17 --max-tokens 2 \
     --cache "$tmp/empty.db" >/dev/null 2>"$tmp/err"; then
  echo "FAILED: a cold start under TAILOR_NO_COMPILE=1 succeeded"; fail=1
fi
check "the cold-start refusal names TAILOR_NO_COMPILE" grep -q "TAILOR_NO_COMPILE" "$tmp/err"
[[ $fail -eq 0 ]] && echo "cli_gpu_run: all checks passed"
exit $fail
