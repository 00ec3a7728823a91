#!/usr/bin/env bash
# cli_tune.sh — `tailor tune` without a GPU: the shape lists of presets and checkpoints, and the
# one-sentence errors (unknown preset, bad flags, no GPU).
set -u
T=${TAILOR_BIN:?}
S=${TAILOR_SOURCE_DIR:?}
fail=0
check() { local what=$1; shift; if "$@"; then :; else echo "FAILED: $what"; fail=1; fi; }

out=$("$T" tune --preset gemma-4-e2b --list 2>&1)
check "e2b lists the double-wide MLP down_proj for W4A16" grep -q "^w4a16_matmul .*k=12288,m=1,n=1536" <<<"$out"
check "e2b lists the dense LM head" grep -q "^matmul .*k=1536,m=1,n=262144" <<<"$out"
check "e2b lists head_dim 512 decode attention (MQA)" grep -q "^attention_decode .*head_dim=512,heads=8,kv_heads=1" <<<"$out"
# a full layer's decode attention at both tuned lengths: 1024 slots for short runs, 4096 else
check "e2b lists the full layers' decode attention at 1024 and 4096 slots" \
  bash -c "grep -q '^attention_decode .*head_dim=512,.*kv_len=1024,.*window=0' <<<\"\$0\" &&
           grep -q '^attention_decode .*head_dim=512,.*kv_len=4096,.*window=0' <<<\"\$0\"" "$out"
check "e2b lists each full-layer decode length once" \
  test "$(grep -c '^attention_decode .*window=0' <<<"$out")" -eq 2
check "e2b lists the sliding window of 512" grep -q "^attention_prefill .*head_dim=256.*window=512" <<<"$out"
# W4A16 decode runs q|k|v and gate|up as stacks (one GEMV each); prefill runs their parts with
# the stack's scale row stride
check "e2b decode folds q's norm and RoPE into the K/V store where a layer has one" \
  grep -q "^gemma4_kv_store .*head_dim=256,kv_heads=1,lin=0,q_heads=8,slots=512,tokens=1" <<<"$out"
check "e2b decode runs no separate q prep from the q|k|v stack (inplace=0) any more" \
  bash -c "! grep -qE '^qk_norm_rope .*inplace=0,.*tokens=1,' <<<\"\$1\"" _ "$out"
check "e2b W4A16 decode runs the q|k|v stack as one GEMV" \
  grep -q "^w4a16_matmul .*k=1536,m=1,n=2560,s_ld=0" <<<"$out"
check "e2b W4A16 decode runs the 12288-wide gate|up stack as one gated GEMV (w4a16_glu)" \
  grep -q "^w4a16_glu .*k=1536,m=1,n=12288,s_ld=0" <<<"$out"
check "e2b W4A16 decode runs the 6144-wide gate|up stack as one gated GEMV" \
  grep -q "^w4a16_glu .*k=1536,m=1,n=6144,s_ld=0" <<<"$out"
check "e2b W4A16 decode runs no fused MLP (w4a16_mlp) by default" \
  bash -c "! grep -q '^w4a16_mlp ' <<<\"\$1\"" _ "$out"
check "e2b W4A16 decode has no gelu_gate kernel of one row left for the MLP" \
  bash -c "! grep -qE '^gelu_gate .*inter=(6144|12288),rows=1' <<<\"\$1\"" _ "$out"
check "e2b W4A16 prefill runs q as a part of its stack" \
  grep -q "^w4a16_matmul .*k=1536,m=512,n=2048,s_ld=2560" <<<"$out"
check "e2b W4A16 lists the int4 LM head (--quantize-head)" \
  grep -q "^w4a16_matmul .*k=1536,m=1,n=262144" <<<"$out"
check "e2b decode attention takes q prepared by qk_norm_rope by default" \
  grep -q "^attention_decode .*prep=0" <<<"$out"
# decode seams run as the next 16-bit GEMV's prologue: after o into the gated gate|up (mode 0),
# after down into the PLE gate (mode 2), after the PLE projection into the next q|k|v (mode 1);
# a one-row seam kernel is left only for the first layer's input norm (3) and the final norm
# (1), and the W4A16 pass's seams before its int4 gate (0) and q/k/v (1; its PLE gate stays
# 16-bit and pays the down seam)
check "e2b pays the o seam in the gate|up GEMV" grep -q "^matmul_pro .*glu=1,k=1536,m=1,mode=0,n=6144" <<<"$out"
check "e2b pays the down seam in the PLE gate" grep -q "^matmul_pro .*glu=2,k=1536,m=1,mode=2,n=256,u_ld=8960" <<<"$out"
check "e2b pays the layer-end seam in the next q|k|v" grep -q "^matmul_pro .*glu=0,k=1536,m=1,mode=1,n=2560" <<<"$out"
check "e2b: no int4 prologue by default" test -z "$(grep '^w4a16_pro' <<<"$out")"
check "e2b: one-row seam kernels only where no GEMV follows (16-bit pass) or an int4 one does" \
  test "$(grep -E '^residual_norm .*rows=1$' <<<"$out" | sed 's/.*mode=\([0-9]\).*/\1/' | sort | tr -d '\n')" = "013"
out=$("$T" tune --preset gemma-4-31b --list 2>&1)
check "31b lists K=V full layers with 4 KV heads" grep -q "^attention_decode .*head_dim=512,heads=32,kv_heads=4" <<<"$out"
out=$("$T" tune --model "$S/tests/fixtures/e2b_flat" --list 2>&1)
check "a checkpoint's config gives its shapes" grep -q "^residual_norm .*cols=64" <<<"$out"
# the list is what the GPU runtime launches (its own dry pass): every op of a forward pass ...
for op in embed gemma4_ple residual_norm qk_norm_rope gemma4_kv_store gemma4_kv_gather \
          attention_decode attention_prefill gelu_gate matmul softcap_argmax topk; do
  check "e2b_flat lists $op" grep -q "^$op " <<<"$out"
done
# ... decode at one row and prefill at the chunk (the fixture's window of 8), stacked q|k|v
check "decode runs q|k|v as one stacked matrix (q 128 + k 32 + v 32 = 192 rows)" \
  grep -q "^matmul .*k=64,m=1,n=192$" <<<"$out"
check "prefill runs the parts, tuned at the chunk (the window, 8 rows)" \
  grep -q "^matmul .*k=64,m=8,n=128$" <<<"$out"
check "no width between one row and the chunk" test -z "$(grep -E 'm=(2|3|4|5|6|7),' <<<"$out")"
check "random-weight fills only for presets" test -z "$(grep '^gemma4_fill' <<<"$out")"
out=$("$T" tune --model "$S/tests/fixtures/e2b_w4a16_asym" --list 2>&1)
check "a W4A16 checkpoint lists its own group and zero points" \
  grep -q "^w4a16_matmul .*group=64,.*zp=1" <<<"$out"
check "a W4A16 checkpoint lists no --quantize shapes (group 128)" \
  test -z "$(grep 'group=128' <<<"$out")"
out=$("$T" tune --preset gemma-4-e2b --list 2>&1)
check "a preset lists the random-weight fill" grep -q "^gemma4_fill " <<<"$out"
check "full layers' decode attention is tuned at 4096 slots" \
  grep -q "^attention_decode .*head_dim=512.*kv_len=4096" <<<"$out"

TMPDIR_ERR=$(mktemp); "$T" tune --preset gemma-9 --list 2>"$TMPDIR_ERR" >/dev/null; rc=$?
check "an unknown preset fails" test $rc -ne 0
check "an unknown preset is named" grep -q "gemma-9" "$TMPDIR_ERR"
"$T" tune --op rmsnorm --shape rows=1,cols=64 --frobnicate 2>"$TMPDIR_ERR"; rc=$?
check "a bad flag exits 2" test $rc -eq 2
check "a bad flag is one line" test "$(wc -l <"$TMPDIR_ERR")" -eq 1
"$T" tune --preset gemma-4-e2b --list --op 2>"$TMPDIR_ERR"; rc=$?
check "tune: --op without its value exits 2 and is named" \
  test $rc -eq 2 -a -n "$(grep "flag '--op' needs a value" "$TMPDIR_ERR")"
HOME=/nonexistent TAILOR_CACHE= "$T" tune --preset gemma-4-e2b --list --cache "" 2>"$TMPDIR_ERR"; rc=$?
check "tune: an empty --cache exits 2 and says so" test $rc -eq 2 -a -n "$(grep -- "--cache is empty" "$TMPDIR_ERR")"
"$T" tune --op rmsnorm 2>"$TMPDIR_ERR"; rc=$?
check "--op without --shape exits 2" test $rc -eq 2
# --check-only times nothing and writes nothing: a cache or step tuning with it is a usage error
for extra in "--cache $TMPDIR_ERR.sqlite" --step-tune --force; do
  "$T" tune --preset gemma-4-e2b --check-only $extra 2>"$TMPDIR_ERR"; rc=$?
  check "tune --check-only $extra exits 2 naming the flag" \
    test $rc -eq 2 -a -n "$(grep -- "${extra%% *} has no use with it" "$TMPDIR_ERR")"
done
check "tune --check-only --cache created no cache" test ! -e "$TMPDIR_ERR.sqlite"
# --where: a subset's best is no winner for the user's cache, so it needs --cache or --check-only
"$T" tune --op rmsnorm --shape rows=1,cols=64 --where VEC=2 2>"$TMPDIR_ERR"; rc=$?
check "tune --where without --cache or --check-only exits 2 and says why" \
  test $rc -eq 2 -a -n "$(grep -- "--where tunes a subset" "$TMPDIR_ERR")"
"$T" tune --op rmsnorm --shape rows=1,cols=64 --where VEC=x --check-only 2>"$TMPDIR_ERR"; rc=$?
check "tune --where VEC=x exits 2 naming the value" \
  test $rc -eq 2 -a -n "$(grep -- "--where: .*'VEC'" "$TMPDIR_ERR")"
"$T" tune --op rmsnorm --shape rows=1,cols=64 --where template= --check-only 2>"$TMPDIR_ERR"; rc=$?
check "tune --where template= exits 2" test $rc -eq 2 -a -n "$(grep -- "must name one template" "$TMPDIR_ERR")"
# the op, its shape keys, --dtype and --seed are checked before any GPU or cache is opened
# (the same answer with and without --list, on a machine with or without a GPU)
for l in "" "--list"; do
  "$T" tune --op nope --shape m=1 $l --cache /nonexistent/c.db 2>"$TMPDIR_ERR"; rc=$?
  check "tune $l: an unknown op exits 1 listing the known ($(cat "$TMPDIR_ERR"))" \
    test $rc -eq 1 -a -n "$(grep "op 'nope' is unknown (known ops: rmsnorm," "$TMPDIR_ERR")"
  "$T" tune --op rmsnorm --shape rows=1,cols=8,z=1 $l --cache /nonexistent/c.db 2>"$TMPDIR_ERR"; rc=$?
  check "tune $l: an unknown shape key is a usage error naming it" \
    test $rc -eq 2 -a -n "$(grep "op rmsnorm has no shape key 'z'" "$TMPDIR_ERR")"
  "$T" tune --op matmul --shape m=1 $l --cache /nonexistent/c.db 2>"$TMPDIR_ERR"; rc=$?
  check "tune $l: a missing shape key is a usage error naming it" \
    test $rc -eq 2 -a -n "$(grep "op matmul needs shape key" "$TMPDIR_ERR")"
  "$T" tune --op rmsnorm --shape rows=1,cols=8 --dtype fp8 $l 2>"$TMPDIR_ERR"; rc=$?
  check "tune $l: a bad --dtype is a usage error" test $rc -eq 2 -a -n "$(grep "dtype 'fp8'" "$TMPDIR_ERR")"
  "$T" tune --op rmsnorm --shape rows=1,cols=8 --seed -1 $l 2>"$TMPDIR_ERR"; rc=$?
  check "tune $l: --seed -1 is a usage error" test $rc -eq 2
done
if ! "$T" devices --json 2>/dev/null | grep -q '"devices":[[:space:]]*\[[[:space:]]*{'; then
  "$T" tune --op rmsnorm --shape rows=1,cols=64 --cache "$TMPDIR_ERR.db" 2>"$TMPDIR_ERR"; rc=$?
  check "tune without a GPU fails" test $rc -eq 1
  check "tune without a GPU says why" grep -q "no CUDA driver\|no usable\|no CUDA" "$TMPDIR_ERR"
fi
# bench model: its help, its flags (the GPU run itself is in the GPU suites)
"$T" bench model --help >"$TMPDIR_ERR" 2>&1; rc=$?
cp "$TMPDIR_ERR" "$TMPDIR_ERR.help"
check "bench model --help exits 0" test $rc -eq 0
check "bench model --help lists --profile and --no-pdl" grep -q -- "--profile.*--no-pdl" "$TMPDIR_ERR"
check "bench model --help lists --seams" grep -q -- "--seams kernel|prologue|epilogue|mixed" "$TMPDIR_ERR"
check "bench model --help lists --attention-q-prep" grep -q -- "--attention-q-prep" "$TMPDIR_ERR"
check "bench model --help lists --quantize-head" grep -q -- "--quantize-head" "$TMPDIR_ERR"
check "bench model --help lists --knockout" grep -q -- "--knockout OP" "$TMPDIR_ERR"
"$T" bench model --preset gemma-4-e2b --act-order 2>"$TMPDIR_ERR"; rc=$?
check "bench model: --act-order without --quantize w4a16 exits 2" test $rc -eq 2
check "bench model: --act-order's refusal says what it needs" grep -q -- "--act-order.*--quantize w4a16" "$TMPDIR_ERR"
"$T" bench model --preset gemma-4-e2b --seams sideways 2>"$TMPDIR_ERR"; rc=$?
check "bench model: a bad --seams exits 2" test $rc -eq 2
check "bench model: a bad --seams says what it takes" grep -q "kernel, prologue, epilogue or mixed" "$TMPDIR_ERR"
# --device: a live GPU as tailor run takes it; anything else is a usage error before GPU work
check "bench model --help lists --device" grep -q -- "--device gpu:N" "$TMPDIR_ERR.help"
for dev in gpu:x cpu "" cuda:-1; do
  "$T" bench model --preset gemma-4-e2b --device "$dev" 2>"$TMPDIR_ERR"; rc=$?
  check "bench model: --device '$dev' exits 2 (rc=$rc)" test $rc -eq 2
  check "bench model: --device '$dev' says what it takes" grep -q "is none of gpu, cuda, gpu:N, cuda:N, N" "$TMPDIR_ERR"
done
# --rehearse: a device profile, checked before any GPU work
check "bench model --help lists --rehearse" grep -q -- "--rehearse PROFILE" "$TMPDIR_ERR.help"
"$T" bench model --preset gemma-4-e2b --rehearse t5 2>"$TMPDIR_ERR"; rc=$?
check "bench model: --rehearse t5 exits 2 (rc=$rc)" test $rc -eq 2
check "bench model: --rehearse t5 is named" grep -q -- "--rehearse 't5' is not a device profile" "$TMPDIR_ERR"
# a kernel benchmark's op and shape are checked before any GPU work (exit 2 even without one)
"$T" bench w4a16 --shape m=1,n=2,k=x 2>"$TMPDIR_ERR"; rc=$?
check "bench w4a16: a malformed shape exits 2" test $rc -eq 2
check "bench w4a16: a malformed shape names the key" grep -q "value of 'k' is not" "$TMPDIR_ERR"
"$T" plan --device h200 --op rmsnorm --shape rows=16,cols=99999999999999999999 2>"$TMPDIR_ERR"; rc=$?
check "plan: a shape value that overflows exits 2" test $rc -eq 2
check "plan: a shape value that overflows gives the limit" \
  grep -q "value of 'cols' is too large (the largest allowed is 2147483647)" "$TMPDIR_ERR"
"$T" plan --device h200 --op rmsnorm --shape rows=16,cols=2147483648 2>"$TMPDIR_ERR"; rc=$?
check "plan: a shape value above INT32_MAX exits 2" test $rc -eq 2
"$T" bench w4a16 --shape m=1,n=2048 2>"$TMPDIR_ERR"; rc=$?
check "bench w4a16: a missing key exits 2 and is named" test $rc -eq 2 -a -n "$(grep "needs shape key 'k'" "$TMPDIR_ERR")"
"$T" bench attention --op attention_nope --shape q_len=1 2>"$TMPDIR_ERR"; rc=$?
check "bench attention: an unknown op exits 1, as in plan and tune" test $rc -eq 1
check "bench attention: an unknown op is named" grep -q "op 'attention_nope' is unknown" "$TMPDIR_ERR"
# numeric flags: the whole text an integer in range, or a usage error naming the flag and text
"$T" bench model --preset gemma-4-e2b --decode 12x 2>"$TMPDIR_ERR"; rc=$?
check "bench model: --decode 12x exits 2" test $rc -eq 2
check "bench model: --decode 12x is named" grep -q -- "--decode takes an integer in \[1, 1048576\], not '12x'" "$TMPDIR_ERR"
"$T" bench model --preset gemma-4-e2b --prompt-len abc 2>"$TMPDIR_ERR"; rc=$?
check "bench model: --prompt-len abc exits 2" test $rc -eq 2
check "bench model: --prompt-len abc is named" grep -q -- "--prompt-len takes an integer" "$TMPDIR_ERR"
"$T" tune --preset gemma-4-e2b --jobs 2k 2>"$TMPDIR_ERR"; rc=$?
check "tune: --jobs 2k exits 2" test $rc -eq 2
check "tune: --jobs 2k is named" grep -q -- "--jobs takes an integer in \[0, 1024\], not '2k'" "$TMPDIR_ERR"
"$T" tune --preset gemma-4-e2b --seed 12s 2>"$TMPDIR_ERR"; rc=$?
check "tune: --seed 12s exits 2" test $rc -eq 2
"$T" bench model --preset gemma-4-e2b --knockout 'matmul:n=two' 2>"$TMPDIR_ERR"; rc=$?
check "bench model: a malformed --knockout exits 2" test $rc -eq 2
check "bench model: a malformed --knockout says what it takes" grep -q "OP or OP:key=value" "$TMPDIR_ERR"
"$T" bench model --preset gemma-4-e2b --knockout 'matmull:n=2' 2>"$TMPDIR_ERR"; rc=$?
check "bench model: a --knockout of an unknown op exits 2" test $rc -eq 2
check "bench model: a --knockout of an unknown op names it" grep -q "not 'matmull:n=2'" "$TMPDIR_ERR"
check "bench model --help lists --trace" grep -q -- "--trace" "$TMPDIR_ERR.help"
"$T" bench model --preset gemma-4-e2b --trace --json 2>"$TMPDIR_ERR"; rc=$?
check "bench model: --trace with --json exits 2" test $rc -eq 2
check "bench model: --trace with --json says why" grep -q "leave out --json" "$TMPDIR_ERR"
"$T" bench model --preset gemma-4-e2b --frobnicate 2>"$TMPDIR_ERR"; rc=$?
check "bench model: a bad flag exits 2" test $rc -eq 2
check "bench model: a bad flag is named" grep -q -- "--frobnicate" "$TMPDIR_ERR"
# --step-tune: in the help, and refused beside the flags whose figures it would not mean
check "bench model --help lists --step-tune" grep -q -- "--step-tune" "$TMPDIR_ERR.help"
"$T" bench model --preset gemma-4-e2b --step-tune --json 2>"$TMPDIR_ERR"; rc=$?
check "bench model: --step-tune with --json exits 2" test $rc -eq 2 -a -n "$(grep "leave out --json" "$TMPDIR_ERR")"
"$T" bench model --preset gemma-4-e2b --step-tune --knockout matmul 2>"$TMPDIR_ERR"; rc=$?
check "bench model: --step-tune with --knockout exits 2" test $rc -eq 2 -a -n "$(grep "leave out --trace and --knockout" "$TMPDIR_ERR")"
"$T" tune --help >"$TMPDIR_ERR" 2>&1
check "tune --help lists --step-tune" grep -q -- "--step-tune \[--quantize w4a16\] \[--quantize-head\]" "$TMPDIR_ERR"
"$T" tune --op rmsnorm --shape rows=1,cols=8 --step-tune 2>"$TMPDIR_ERR"; rc=$?
check "tune --step-tune with --op exits 2" test $rc -eq 2 -a -n "$(grep "give --preset or --model" "$TMPDIR_ERR")"
"$T" tune --preset gemma-4-e2b --quantize w4a16 2>"$TMPDIR_ERR"; rc=$?
check "tune --quantize without --step-tune exits 2" test $rc -eq 2 -a -n "$(grep "choose the run --step-tune tunes" "$TMPDIR_ERR")"
"$T" tune --preset gemma-4-e2b --step-tune --quantize int8 2>"$TMPDIR_ERR"; rc=$?
check "tune --quantize int8 exits 2 naming it" test $rc -eq 2 -a -n "$(grep "takes w4a16, not 'int8'" "$TMPDIR_ERR")"
# bench sampler runs on the CPU: a small vocabulary, its line, and its flags refused in a sentence
out=$("$T" bench sampler --vocab 4096 --top-k 100 --top-p 0.9 --temperature 0.8 2>"$TMPDIR_ERR"); rc=$?
check "bench sampler runs without a GPU ($out)" test $rc -eq 0
check "bench sampler prints us per draw, checked" \
  grep -q "^sampler, vocab 4096, top-k 100, top-p 0.9, temperature 0.8: [0-9.]* us per draw .*100 draws checked" <<<"$out"
"$T" bench sampler --top-p 1.5 2>"$TMPDIR_ERR"; rc=$?
check "bench sampler: --top-p 1.5 exits 2 naming it" test $rc -eq 2 -a -n "$(grep -- "--top-p takes a number in (0, 1\], not '1.5'" "$TMPDIR_ERR")"
"$T" bench sampler --temperature -1 2>"$TMPDIR_ERR"; rc=$?
check "bench sampler: --temperature -1 exits 2 naming it" test $rc -eq 2 -a -n "$(grep -- "--temperature takes a number above 0, not '-1'" "$TMPDIR_ERR")"
"$T" bench sampler --top-k many 2>"$TMPDIR_ERR"; rc=$?
check "bench sampler: --top-k many exits 2 naming it" test $rc -eq 2 -a -n "$(grep -- "--top-k takes an integer" "$TMPDIR_ERR")"
"$T" bench sampler --frobnicate 2>"$TMPDIR_ERR"; rc=$?
check "bench sampler: a bad flag exits 2 and is named" test $rc -eq 2 -a -n "$(grep "flag '--frobnicate' is unknown" "$TMPDIR_ERR")"
check "bench sampler: the usage error is one line" test "$(wc -l <"$TMPDIR_ERR")" -eq 1
# every bench subcommand answers --help (exit 0, its usage on stdout)
for sub in copy kernel w4a16 attention strategies tokenizer sampler model; do
  out=$("$T" bench $sub --help 2>"$TMPDIR_ERR"); rc=$?
  check "bench $sub --help exits 0 with a usage" test $rc -eq 0 -a -n "$(echo "$out" | grep usage)"
done
# TAILOR_TIMING_SPACER: a misspelt op in its list is refused in one sentence naming it (planning
# hashes every space with its timing method), a right one plans as usual
TAILOR_TIMING_SPACER=rmsnorm,atention_decode "$T" plan --device h100 --op rmsnorm \
  --shape rows=1,cols=64 >/dev/null 2>"$TMPDIR_ERR"; rc=$?
check "TAILOR_TIMING_SPACER with a misspelt op exits 2 naming it" test $rc -eq 2 -a \
  "$(cat "$TMPDIR_ERR")" = "tailor: TAILOR_TIMING_SPACER='rmsnorm,atention_decode': 'atention_decode' is no op (give 0, 1 or a comma-separated list of op names, e.g. attention_decode,rmsnorm)"
out=$(TAILOR_TIMING_SPACER=rmsnorm,attention_decode "$T" plan --device h100 --op rmsnorm \
  --shape rows=1,cols=64 2>&1); rc=$?
check "TAILOR_TIMING_SPACER with op names plans" test $rc -eq 0 -a -n "$(grep -E 'candidates, [1-9][0-9]* survive' <<<"$out")"
rm -f "$TMPDIR_ERR" "$TMPDIR_ERR.db" "$TMPDIR_ERR.help"
[ $fail -eq 0 ] && echo "cli_tune: all checks passed"
exit $fail
