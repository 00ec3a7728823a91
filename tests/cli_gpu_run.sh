#!/usr/bin/env bash
# cli_gpu_run.sh — first boot then a warm start, on a live GPU (issue 7, item 5): `tailor tune
# --model` tunes every kernel shape the runtime will launch (the list is the runtime's own dry
# pass), after which `tailor run` with TAILOR_NO_COMPILE=1 compiles nothing: prompts shorter
# than a chunk, longer than one (chunks with history), a 16-bit and a W4A16 checkpoint, and a
# 16-bit checkpoint quantized on load; sampling and --dump-logits on the GPU path.
set -u
source "$(dirname "$0")/gpu_preamble.sh" # T, the skip without a GPU, $tmp, fail, check
S=${TAILOR_SOURCE_DIR:?}

for fx in e2b_flat e2b_w4a16_asym; do
  M=$S/tests/fixtures/$fx
  out=$("$T" tune --model "$M" --cache "$tmp/c.db" 2>&1); rc=$?
  check "tune --model $fx (rc=$rc: $(tail -1 <<<"$out"))" test $rc -eq 0
  # a model's boot halves the field in rounds unless --strategy says otherwise
  check "tune --model $fx halves by default" grep -q "; strategy halving; seed " <<<"$out"
  for ids in 2,17,33 2,17,33,5,9,11,40,41,42,43,44,45,46; do
    out=$(TAILOR_NO_COMPILE=1 "$T" run --model "$M" --ids "$ids" --max-tokens 6 --print-ids \
          --cache "$tmp/c.db" 2>"$tmp/err"); rc=$?
    check "warm run of $fx with prompt $ids compiles nothing (rc=$rc: $(tail -1 "$tmp/err"))" \
      test $rc -eq 0
    check "$fx prints 6 ids" grep -qE '^([0-9]+,){5}[0-9]+' <<<"$out"
    # item 3: the first log line states the device, its capability, the compute dtype and
    # whether the kernels came from the cache (after the first boot: all of them)
    check "the first log line of $fx names device, sm, dtype and the cache ($(head -1 "$tmp/err"))" \
      grep -qE '^tailor: gemma4 gpu: .+, sm_[0-9]+, compute (bf16|fp16) \(follows the device\), weights .+; all [0-9]+ kernels in the cache$' \
      <(head -1 "$tmp/err")
  done
done
out=$(TAILOR_NO_COMPILE=1 "$T" run --model "$S/tests/fixtures/e2b_flat" --quantize w4a16 \
      --ids 2,17,33 --max-tokens 4 --print-ids --cache "$tmp/c.db" 2>&1); rc=$?
check "warm run quantized on load compiles nothing (rc=$rc: $(tail -1 <<<"$out"))" test $rc -eq 0
# sampling on the GPU path (with top-k from 1 to 127 the row's 128 best downloaded, with top-k 0
# the whole row into pinned memory, then the host sampler; flags left out default to
# transformers' top-k 50 here, the fixture having no generation_config.json): top-k 1 is greedy
# where no logit ties the maximum (top-k keeps ties, as transformers does; none in these rows),
# so its ids equal the device argmax's; a seed gives the same ids twice, on both paths
M=$S/tests/fixtures/e2b_flat
# a rehearsal's first log line says whose kernels run: the T4 profile's, here
first=$("$T" run --model "$M" --ids 2,17,33 --max-tokens 2 --rehearse t4 --cache "$tmp/c.db" \
        2>&1 >/dev/null | head -1)
check "the first log line of a rehearsal names the profile and its dtype ($first)" \
  grep -qE "compute fp16 \(follows the rehearsed profile\), .*\(a rehearsal: chosen and compiled under the t4 profile's budget, Tesla T4, sm_75\)$" \
  <<<"$first"
run_ids() { "$T" run --model "$M" --ids 2,17,33 --max-tokens 6 --print-ids \
              --cache "$tmp/c.db" "$@" 2>/dev/null | grep -E '^([0-9]+,){5}[0-9]+' | head -1; }
greedy=$(run_ids --greedy)
topk1=$(run_ids --temperature 0.7 --top-k 1 --seed 3)
check "top-k 1 sampling on the GPU gives the greedy ids ($topk1 vs $greedy)" \
  test -n "$greedy" -a "$topk1" = "$greedy"
s1=$(run_ids --temperature 1.5 --top-p 0.95 --seed 42)
s2=$(run_ids --temperature 1.5 --top-p 0.95 --seed 42)
check "a seeded GPU sampling run repeats ($s1 vs $s2)" test -n "$s1" -a "$s1" = "$s2"
r1=$(run_ids --temperature 1.5 --top-p 0.95 --top-k 0 --seed 42)
r2=$(run_ids --temperature 1.5 --top-p 0.95 --top-k 0 --seed 42)
check "a seeded GPU sampling run from whole rows repeats ($r1 vs $r2)" test -n "$r1" -a "$r1" = "$r2"
# greedy decoding queued ahead streams the ids the sampler's top-k 1 gave; --max-tokens 0 prints
# no id (as on the CPU)
none=$("$T" run --model "$M" --ids 2,17,33 --max-tokens 0 --greedy --print-ids --cache "$tmp/c.db" \
       2>/dev/null | grep -cE '[0-9]')
check "--max-tokens 0 on the GPU prints no id ($none lines with digits)" test "$none" = 0
# stop ids on the GPU path (issue 7, item 6), as cli_run.sh checks them on the CPU: the greedy
# run, queued ahead, ends at its first id when generation_config.json makes that id a stop (the
# step queued past it is discarded, nothing printed after it); a seeded sampled run gives all 16
# ids with a stop past the vocabulary and ends at the fourth id's first occurrence with that id
# as a stop, the draws before it unchanged
F=$tmp/with_stops
cp -r "$M" "$F"
first=$("$T" run --model "$M" --ids 2,17,33 --max-tokens 6 --greedy --print-ids \
          --cache "$tmp/c.db" 2>/dev/null | grep -oE '^[0-9]+' | head -1)
printf '{"eos_token_id": [%s]}' "$first" >"$F/generation_config.json"
got=$("$T" run --model "$F" --ids 2,17,33 --max-tokens 6 --greedy --print-ids --cache "$tmp/c.db" \
      2>/dev/null)
check "greedy on the GPU ends at the stop $first, its first id ($got)" test -n "$first" -a "$got" = "$first"
SR="--model $F --ids 2,17,33 --max-tokens 16 --print-ids --temperature 3 --top-k 32 --top-p 1 --seed 7 --cache $tmp/c.db"
printf '{"eos_token_id": [100000]}' >"$F/generation_config.json"
all=$("$T" run $SR 2>/dev/null)
check "sampled on the GPU with a stop past the vocabulary: 16 ids ($all)" \
  test "$(tr ',' '\n' <<<"$all" | wc -l)" -eq 16
fourth=$(cut -d, -f4 <<<"$all")
want=$(tr ',' '\n' <<<"$all" | awk -v s="$fourth" '{print} $1 == s {exit}' | paste -sd,)
printf '{"eos_token_id": [100001, %s]}' "$fourth" >"$F/generation_config.json"
got=$("$T" run $SR 2>/dev/null)
check "sampled on the GPU ends at the stop $fourth's first occurrence ($got, want $want)" \
  test -n "$fourth" -a "$got" = "$want"
# a NaN in the weights (the final norm, as cli_run.sh does on the CPU): the GPU forward reports
# the non-finite logits (issue 7, item 3), exit 1, no id printed
mkdir "$tmp/nan" && cp "$M/config.json" "$M/model.safetensors" "$tmp/nan/"
python3 - "$tmp/nan/model.safetensors" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "r+b"); n = struct.unpack("<Q", f.read(8))[0]
off = json.loads(f.read(n))["model.norm.weight"]["data_offsets"][0]
f.seek(8 + n + off); f.write(struct.pack("<H", 0x7fc0))  # bf16 NaN
PY
out=$("$T" run --model "$tmp/nan" --ids 2,17,33 --max-tokens 4 --greedy --print-ids \
      --cache "$tmp/c.db" 2>"$tmp/err"); rc=$?
check "NaN weights fail on the GPU (rc $rc, ids '$out')" test $rc -eq 1 -a -z "$out"
check "... reported as such ($(tail -1 "$tmp/err"))" \
  grep -q "gemma4 gpu: inf or NaN in the activations" "$tmp/err"
# --dump-logits on the GPU: every prompt row, fp32, and the last row's argmax is the first id
"$T" run --model "$M" --ids 2,17,33 --max-tokens 2 --greedy --print-ids \
  --dump-logits "$tmp/logits.f32" --cache "$tmp/c.db" >"$tmp/dump.out" 2>&1
check "the dumped logits are 3 rows of the vocabulary whose last argmax is the first id" \
  python3 - "$M/config.json" "$tmp/logits.f32" "$tmp/dump.out" <<'PY'
import json, struct, sys, re
cfg = json.load(open(sys.argv[1]))
v = cfg.get("vocab_size") or cfg["text_config"]["vocab_size"]
data = open(sys.argv[2], "rb").read()
assert len(data) == 3 * v * 4, (len(data), v)
last = struct.unpack("<%df" % v, data[2 * v * 4:])
first = int(re.search(r"^(\d+),", open(sys.argv[3]).read(), re.M).group(1))
assert max(range(v), key=lambda i: last[i]) == first
PY
# and the guard itself: an empty cache under TAILOR_NO_COMPILE=1 fails, naming the variable
if TAILOR_NO_COMPILE=1 "$T" run --model "$S/tests/fixtures/e2b_flat" --ids 2,17 --max-tokens 2 \
     --cache "$tmp/empty.db" >/dev/null 2>"$tmp/err"; then
  echo "FAILED: a cold start under TAILOR_NO_COMPILE=1 succeeded"; fail=1
fi
check "the cold-start refusal names TAILOR_NO_COMPILE" grep -q "TAILOR_NO_COMPILE" "$tmp/err"
[[ $fail -eq 0 ]] && echo "cli_gpu_run: all checks passed"
exit $fail
