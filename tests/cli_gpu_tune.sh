#!/usr/bin/env bash
# cli_gpu_tune.sh — the tuner end to end on a live GPU: RMSNorm over Gemma 4's widths in both
# dtypes (every survivor checked), a second run that compiles nothing, export to a fresh cache
# on "another host", warm start with TAILOR_NO_COMPILE=1, rehearsal of the T4, cache verify, the
# carveout in the key.
set -u
source "$(dirname "$0")/gpu_preamble.sh" # T, the skip without a GPU, $tmp, fail, check
check() { if ! "$@"; then echo "FAILED: $*"; fail=1; fi; }

for cols in 256 512 1536 2560 5376; do
  for rows in 1 7 33; do
    check "$T" tune --op rmsnorm --shape rows=$rows,cols=$cols --dtype bf16 --verify-all --cache "$tmp/a.sqlite" --seed 11
  done
  check "$T" tune --op rmsnorm --shape rows=5,cols=$cols --dtype fp16 --verify-all --cache "$tmp/a.sqlite" --seed 12
done
check "$T" tune --op rmsnorm --shape rows=3,cols=512,weight=0 --dtype bf16 --verify-all --cache "$tmp/a.sqlite"

# one --op shape times every survivor fully unless --strategy says otherwise
out=$("$T" tune --op rmsnorm --shape rows=2,cols=256 --dtype bf16 --cache "$tmp/s.sqlite" 2>&1)
check grep -q "; strategy exhaustive; seed " <<<"$out"
out=$("$T" tune --op rmsnorm --shape rows=3,cols=256 --dtype bf16 --strategy halving --cache "$tmp/s.sqlite" 2>&1)
check grep -q "; strategy halving; seed " <<<"$out"

# --check-only: every survivor checked, nothing timed, no cache opened (not even the default)
out=$(TAILOR_CACHE="$tmp/default.sqlite" "$T" tune --op rmsnorm --shape rows=7,cols=1536 --dtype bf16 --check-only 2>&1)
rc=$?
echo "$out"
check test $rc -eq 0
check grep -q "wrong; checked only, nothing timed or cached" <<<"$out"
check grep -qE " [1-9][0-9]* right, 0 wrong" <<<"$out"
check test ! -e "$tmp/default.sqlite"

# --where: only the survivors with VEC=2 tried, the winner one of them, in a cache of its own
# (tuned again over a cached winner of the whole space)
check "$T" tune --op rmsnorm --shape rows=7,cols=1536 --dtype bf16 --cache "$tmp/where.sqlite"
out=$("$T" tune --op rmsnorm --shape rows=7,cols=1536 --dtype bf16 --where VEC=2,THREADS=64 --cache "$tmp/where.sqlite" 2>&1)
echo "$out"
check grep -q "winner rmsnorm THREADS=64 VEC=2 " <<<"$out"
# the winner's resident blocks an SM (the driver's occupancy, under the kernel's carveout), and
# each timed trial's in the cache
check grep -qE "GB/s  [0-9]+ blocks?/SM  \[" <<<"$out"
check grep -qE "timed .*rmsnorm .*[0-9]+ blocks? an SM" <("$T" cache trials --cache "$tmp/where.sqlite")
# a candidate far behind the best is timed by its warm-up pass alone (topk at the vocabulary:
# the one-block configurations take hundreds of microseconds where the winner takes ~25), and
# its trial says so; the winner is timed in full
out=$("$T" tune --op topk --shape rows=1,n=262144,k=128 --dtype bf16 --cache "$tmp/topk.sqlite" 2>&1)
echo "$out"
check grep -q "winner topk" <<<"$out"
check grep -q "timed by its warm-up pass alone (over 2x the best" <("$T" cache trials --cache "$tmp/topk.sqlite")
if "$T" tune --op rmsnorm --shape rows=7,cols=1536 --dtype bf16 --where VEC=3 --cache "$tmp/where.sqlite" 2>"$tmp/err"; then
  echo "FAILED: --where VEC=3 (no such survivor) tuned"; fail=1
fi
check grep -q "matches --where" "$tmp/err"

# second run: everything cached, nothing compiled (TAILOR_NO_COMPILE would fail a compile)
out=$(TAILOR_NO_COMPILE=1 "$T" tune --op rmsnorm --shape rows=7,cols=2560 --dtype bf16 --cache "$tmp/a.sqlite" 2>&1)
echo "$out"
check grep -q "cached:" <<<"$out"
# an uncached shape with TAILOR_NO_COMPILE=1 is an error naming the shape
if TAILOR_NO_COMPILE=1 "$T" tune --op rmsnorm --shape rows=9,cols=2560 --dtype bf16 --cache "$tmp/a.sqlite" 2>"$tmp/err"; then
  echo "FAILED: an uncached shape compiled under TAILOR_NO_COMPILE=1"; fail=1
fi
check grep -q "TAILOR_NO_COMPILE=1" "$tmp/err"

# export, import into a fresh cache, warm start there
check "$T" cache export "$tmp/winners.json" --cache "$tmp/a.sqlite"
check "$T" cache import "$tmp/winners.json" --cache "$tmp/b.sqlite"
out=$(TAILOR_NO_COMPILE=1 "$T" tune --op rmsnorm --shape rows=33,cols=5376 --dtype bf16 --cache "$tmp/b.sqlite" 2>&1)
echo "$out"
check grep -q "cached:" <<<"$out"
check "$T" cache verify --cache "$tmp/b.sqlite"

# rehearse the T4: compute_75 PTX, the T4's budget, run here
check "$T" tune --op rmsnorm --shape rows=7,cols=2560 --dtype fp16 --rehearse t4 --verify-all --cache "$tmp/a.sqlite"
if "$T" tune --op rmsnorm --shape rows=7,cols=2560 --dtype bf16 --rehearse t4 --cache "$tmp/a.sqlite" 2>"$tmp/err"; then
  echo "FAILED: bf16 tuned under the T4's budget"; fail=1
fi
check grep -q "bf16" "$tmp/err"
"$T" cache ls --cache "$tmp/a.sqlite" | head -5

# the carveout is part of the key when it is not the default: a winner of the default split
# does not answer under TAILOR_CARVEOUT=driver (tuned again, under a key of its own), and the
# default's winner still answers afterwards; a malformed value names the variable
out=$(TAILOR_CARVEOUT=driver TAILOR_NO_COMPILE=1 "$T" tune --op rmsnorm --shape rows=7,cols=2560 --dtype bf16 --cache "$tmp/a.sqlite" 2>&1)
echo "$out"
check grep -q "TAILOR_NO_COMPILE=1" <<<"$out"
check env TAILOR_CARVEOUT=driver "$T" tune --op rmsnorm --shape rows=7,cols=2560 --dtype bf16 --cache "$tmp/a.sqlite"
check grep -q "carveout=driver" <("$T" cache ls --cache "$tmp/a.sqlite" 2>&1)
out=$(TAILOR_NO_COMPILE=1 "$T" tune --op rmsnorm --shape rows=7,cols=2560 --dtype bf16 --cache "$tmp/a.sqlite" 2>&1)
check grep -q "cached:" <<<"$out"
out=$(TAILOR_CARVEOUT=driver TAILOR_NO_COMPILE=1 "$T" tune --op rmsnorm --shape rows=7,cols=2560 --dtype bf16 --cache "$tmp/a.sqlite" 2>&1)
check grep -q "cached:" <<<"$out"
if TAILOR_CARVEOUT=half "$T" tune --op rmsnorm --shape rows=7,cols=2560 --dtype bf16 --cache "$tmp/a.sqlite" 2>"$tmp/err"; then
  echo "FAILED: TAILOR_CARVEOUT=half tuned"; fail=1
fi
check grep -q "TAILOR_CARVEOUT='half'" "$tmp/err"
exit $fail
