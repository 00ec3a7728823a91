#!/usr/bin/env bash
# gpu-check.sh — on the GPU machine: build, run every GPU test, then the benchmarks; logs go to
# $OUT (ctest.txt, bench.txt, model.txt, ...) and a short summary is printed last.
#   bash scripts/gpu-check.sh [tests|quick|gemma4|bench|model|knockout|profile|probe|pdl|fused|fused-bench|attn|sanitize|carveout-kernels|experimental|experimental-attn|attn-wg|wgmma|boot|decode-scale|decode-wg|decode-merge|decode-linear|decode-flat|trace|spacer|seams|step-tune|queue|sample|topk|carveout|cards|w4-base-new|mlp|order|order-bench|all] [ctest -R regex]
# quick: the GPU tests but test_gpu_gemma4 with the long scripts in their smoke subsets
# (MATMUL_QUICK, W4A16_QUICK, ATTN_QUICK); on an H100 (session 27) cli_gpu_small_ops 241 s,
# cli_gpu_w4a16 202, test_gpu_gemma4_load 95, cli_gpu_matmul 94, cli_gpu_run 70,
# cli_gpu_attention 67, cli_gpu_tune 41 (session 33: cli_gpu_sanitize 156, cli_gpu_bench 38):
# plan three calls, split by the second argument (a ctest -R regex: 'cli_gpu_w4a16|
# cli_gpu_small_ops', 'cli_gpu_sanitize|cli_gpu_matmul|test_gpu_gemma4_load' and the rest,
# '^(test_gpu_cuda|test_gpu_step_tune|cli_gpu_run|cli_gpu_tune|cli_gpu_attention|cli_gpu_bench)$');
# gemma4: test_gpu_gemma4 alone
# (GEMMA4_FIXTURES=a,b picks fixtures: two fixtures ~85-110 s on an H100; all five, nine modes each, take
# about a call; e2b_w4a16_asym alone ~3 minutes on an H100); model: Gemma 4 E2B decode and prefill figures
# with the same-run comparisons (PDL off, gating kernels, each place of the seams, q prepared
# inside attention, W4A16 with and without int4 prologues, the int4 LM head, 31B); knockout:
# the decode step with families of kernels skipped (what each costs on the critical path);
# profile: ncu reports of the int4 GEMV and the decode attention kernels (ncu.txt); probe: the
# launch and DRAM-read floors beside the tuned kernels of the same shapes (probe.txt); pdl: the
# decode step with the small kernels between GEMVs triggering their dependents before their own
# wait, against the committed order (scripts/probe/pdl_variants.sh through ab_model.sh, W4A16 and
# bf16; PDL_NAMES picks the variants, default small; pdl.txt; ~7 minutes a variant); fused:
# the int4 gated GEMV (w4a16_glu, w4a16_pro glu=1) and q folded into the K/V store verified
# (cli_gpu_w4a16 and cli_gpu_small_ops quick, test_gpu_gemma4 on the asym fixture, fused.txt);
# fused-bench: the decode step with each fusion and without it (fused-bench.txt); attn: every
# attention survivor verified (cli_gpu_attention), then prefill and decode at 8k/32k timed with
# the working tree's templates and with probe-variants/base's (scripts/probe/base_templates.sh
# REV) in the same run, plus the int4 gated GEMV against the 2N GEMV + gelu_gate (attn.txt);
# experimental: the experimental W4A16 templates (TAILOR_EXPERIMENTAL=1; w4a16_wgmma_dec, session
# 31) verified survivor by survivor (tune --verify-all), then benched with them and without them
# in the same run, and every configuration's time (experimental.txt; EXP_STEP=pairs: shape by
# shape, verify then bench, for a call that may be cut short; EXP_STEP=ws: w4a16_wgmma_ws, session
# 36, verified at five prefill shapes and benched at m = 2048 / 512). experimental-attn: the same for the
# experimental attention templates (none at present; session 13 promoted the last two) at
# head_dim 256 and 512: five prefill
# verify-all shapes (window, full causal, chunked GQA fp16, window 1, head_dim 512) and three
# decode ones (8k MQA, GQA batch 3 fp16 at head_dim 512, a 3,000-slot ring), then the 8k and
# 512-token prefills and the 8k / 32k decodes with and without them (experimental-attn.txt). boot: `tailor tune --preset
# gemma-4-e2b` from an empty cache under `time` (the first-boot cost), then the E2B W4A16 and bf16
# benches on that cache (boot.txt). wgmma: every w4a16_matmul survivor (experimental ones included)
# verified at two shapes, test_gpu_gemma4 with the default spaces (g4.txt), the m = 2048 benches
# beside cuBLAS and each wgmma configuration's time (trials; wgmma.txt). decode-merge: every
# decode survivor verified at four shapes (DM_VERIFY="SHAPE DTYPE;..." replaces them), the long
# caches (DM_SHAPES="SHAPE ...") benched with base and new templates (bench_base_new; DM_ROUNDS="1
# 2" alternates two rounds; each cache's trials in dm-base-trials.txt, dm-new-trials.txt), then the
# per-block timeline (DM_TIMELINE=0 skips it); decode-linear: the
# same at the E2B full layer's two tuned lengths, then the preset tuned and the E2B benches with
# both templates (decode-linear.txt). trace: the E2B decode step's timeline (bench model --trace:
# each launch's release from its grid wait, the gap to the next one, per kernel sums) for bf16 and
# for W4A16 + int4 head (TRACE_W picks one), each after the plain bench on the same cache
# (trace.txt, trace-bf16.txt, trace-w4a16.txt). spacer: the E2B decode with winners tuned under
# the spacer timing (space.h, TAILOR_TIMING_METHOD_SPACER) for the W4A16 ops (the default), for every op
# (TAILOR_TIMING_SPACER=1) and for none (=0), each in its own cache, alternating, bf16 then
# W4A16 + int4 head (SPACER_W picks: "w4a16" alone); then W4A16 with the seams in the int4 GEMVs'
# prologue (spacer.txt). seams: the W4A16 + int4 head decode with each place of the seams
# (default, mixed, epilogue, kernel, prologue) alternating on one cache (seams.txt). step-tune:
# test_gpu_step_tune, then the E2B decode before and after `bench model --step-tune` (W4A16 +
# int4 head by default; STEP_W=bf16 for bf16) and plain benches of the caches before and after,
# alternating (step-tune.txt). queue: greedy decode queued ahead against --one-by-one and
# --ple-host, alternating on one cache (QUEUE_W, QUEUE_VARIANTS="queued,--one-by-one,--ple-host"
# by default, QUEUE_STEP_TUNE=1 adds --step-tune; queue.txt).
# cards: what a 99 KB sm_86 card (A10G, L4, RTX 3090/4090) runs, rehearsed here: its head_dim 512
# attention tiles verified survivor by survivor, test_gpu_gemma4's rehearse-a10g mode (cards.txt).
# decode-flat: attention_decode's flat merge (FLAT = 1) verified survivor by survivor natively and
# under the T4 and A10G profiles, then E2B's decode shapes and 8k benched with probe-variants/base's
# templates and the working tree's under each profile (FLAT_PROFILES, FLAT_SHAPES, FLAT_VERIFY=0;
# decode-flat.txt, df-SIDE-PROFILE-trials.txt).
# sample: the op topk verified, then the E2B decode sampled from whole rows against from the
# 64 best, beside greedy (SAMPLE_W; SAMPLE_QUICK_TUNE=1: bf16 tuned with 2 random trials a
# shape first, for a quick comparison; sample.txt).
# carveout-kernels: the W4A16 decode shapes (m = 16 too) and the long-cache decode attention tuned
# and benched under each preferred shared-memory carveout (TAILOR_CARVEOUT: 25, the default,
# driver, 100), each in its own cache (carveout-kernels.txt, ck-trials-P.txt).
# sanitize: tests/cli_gpu_sanitize.sh alone (every survivor of the ops with dynamic shared memory
# at small shapes, under compute-sanitizer memcheck and racecheck, after a control that must be
# caught; sanitize.txt; SAN_TOOLS, SAN_ONLY pick).
# mlp: the fused int4 MLP (w4a16_mlp) verified survivor by survivor at five shapes and the T4,
# then the E2B W4A16 decode without it and with it (--fused-mlp), alternating (MLP_VERIFY, MLP_BENCH;
# MLP_QUICK=1 verifies the E2B shapes and the small one only).
# order: activation order (weight_g_idx) verified: every gather_cols survivor, then
# test_gpu_gemma4 on the regrouped fixture and e2b_w4a16_asym (ORDER_FIXTURES, ORDER_S);
# order-bench: the E2B W4A16 + int4 head decode with every int4 linear in an activation order
# (bench model --act-order) and without, alternating on one cache (order-bench.txt).
# w4-base-new: an int4 template edit against probe-variants/base's templates in the same run
# (scripts/probe/base_templates.sh REV; carry probe-variants): every survivor verified at
# W4_VERIFY's shapes, then W4_SHAPES benched base, new, base, new (W4_BENCH_TIMEOUT seconds a
# bench, default 90: the 31B shapes at m = 2048 tune longer than that) (a "glu:" prefix: op w4a16_glu) (w4-base-new.txt; the new
# cache's trials in w4-trials.txt; export TAILOR_EXPERIMENTAL=1 for an experimental space).
set -uo pipefail
what=${1:-all}
filter=${2:-}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
bash scripts/gpu-build.sh || exit 1
source scripts/gpu-env.sh
T=$PWD/build-gpu/tailor
summary=()

# verify_all LOG OP CACHE "SHAPE DTYPE"...: every survivor of each shape checked against the C
# reference (tune --verify-all), an rc= line after each; VERIFY_FLAGS adds tune flags
# (--rehearse a10g)
verify_all() {
  local log=$1 op=$2 cache=$3 sd
  shift 3
  for sd in "$@"; do
    echo "== verify-all $op $sd ${VERIFY_FLAGS:-}" >>"$log"
    timeout 120 "$T" tune --op "$op" --shape "${sd% *}" --dtype "${sd#* }" --verify-all \
      --cache "$cache" ${VERIFY_FLAGS:-} >>"$log" 2>&1
    echo "rc=$?" >>"$log"
  done
}
# e2b_bench W [FLAGS...]: sets B to the E2B benchmark for weights W ("w4a16": W4A16 + int4
# head; "bf16"), 512-token prompt and 128 decoded tokens, with FLAGS (a --cache) after it
e2b_bench() {
  local w=$1 q=""
  shift
  [[ $w == w4a16 ]] && q="--quantize w4a16 --quantize-head"
  B="$T bench model --preset gemma-4-e2b $q --prompt-len 512 --decode 128${*:+ $*}"
}
# bench_attention LOG OP CACHE LIMIT_S SHAPE...: each shape tuned (if new) and benched
bench_attention() {
  local log=$1 op=$2 cache=$3 limit=$4 s
  shift 4
  for s in "$@"; do
    echo "== bench $op $s" >>"$log"
    timeout "$limit" "$T" bench attention --op "$op" --shape "$s" --cache "$cache" >>"$log" 2>&1
  done
}
# bench_base_new LOG PREFIX SHAPE...: the decode shapes benched with probe-variants/base's
# templates (when there: scripts/probe/base_templates.sh REV; cache PREFIX-base.sqlite), then with
# the working tree's (PREFIX-new.sqlite), in the same run
bench_base_new() {
  local log=$1 prefix=$2
  shift 2
  if [[ -d probe-variants/base/templates ]]; then
    echo "== base: $(cat probe-variants/base/REV)" >>"$log"
    (export TAILOR_TEMPLATE_PATH=$PWD/probe-variants/base/templates
     bench_attention "$log" attention_decode "$prefix-base.sqlite" 90 "$@")
  fi
  echo "== new" >>"$log"
  bench_attention "$log" attention_decode "$prefix-new.sqlite" 90 "$@"
}
if [[ $what == quick || $what == gemma4 ]]; then
  export MATMUL_QUICK=1 W4A16_QUICK=1 ATTN_QUICK=1
fi
if [[ $what == quick ]]; then # every GPU test but test_gpu_gemma4
  (cd build-gpu && ctest -L gpu -E '^test_gpu_gemma4$' ${filter:+-R "$filter"} \
    --output-on-failure --timeout 1800) >"$OUT/ctest.txt" 2>&1
  summary+=("gpu tests but test_gpu_gemma4: $(grep -E 'tests passed|tests failed' "$OUT/ctest.txt" | tail -1)")
fi
if [[ $what == gemma4 ]]; then # test_gpu_gemma4 alone (GEMMA4_FIXTURES picks; all: ~10 minutes)
  (cd build-gpu && env TAILOR_SOURCE_DIR=$PWD/.. \
    ${GEMMA4_FIXTURES:+TAILOR_TEST_FIXTURES=$GEMMA4_FIXTURES} \
    timeout "${GEMMA4_S:-570}" ./tests/test_gpu_gemma4) >"$OUT/gemma4.txt" 2>&1
  echo "rc=$?" >>"$OUT/gemma4.txt"
  summary+=("test_gpu_gemma4: $(tail -2 "$OUT/gemma4.txt" | tr '\n' ' ')")
fi
if [[ $what == tests || $what == all ]]; then
  (cd build-gpu && ctest -L gpu ${filter:+-R "$filter"} --output-on-failure --timeout 1800) \
    >"$OUT/ctest.txt" 2>&1
  summary+=("gpu tests: $(grep -E 'tests passed|tests failed' "$OUT/ctest.txt" | tail -1)")
  grep -E '^\s+[0-9]+ - ' "$OUT/ctest.txt" | sed 's/^/  failed: /' | while read -r l; do echo "$l"; done
fi
if [[ $what == bench || $what == all ]]; then
  B="$OUT/bench.txt"
  : >"$B"
  cache=/tmp/bench.sqlite
  "$T" bench copy >>"$B" 2>&1
  # issue 4's shapes: m = 1 and 16 on the E2B MLP, every >= 50 MB one (31B gate/up, down, q/o;
  # E4B gate/up, down; the int4 head), m = 2048 on the E2B MLP
  for s in m=1,n=6144,k=1536 m=1,n=1536,k=6144 m=1,n=12288,k=1536 m=1,n=1536,k=12288 \
           m=16,n=6144,k=1536 m=16,n=1536,k=6144 m=16,n=12288,k=1536 m=16,n=1536,k=12288 \
           m=1,n=21504,k=5376 m=1,n=5376,k=21504 m=1,n=16384,k=5376 m=1,n=10240,k=2560 \
           m=1,n=2560,k=10240 m=1,n=262144,k=1536 \
           m=2048,n=6144,k=1536 m=2048,n=1536,k=6144; do
    "$T" bench w4a16 --shape "$s,group=128" --cache "$cache" >>"$B" 2>&1
  done
  for s in kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0,batch=1 \
           kv_len=8192,head_dim=512,heads=8,kv_heads=1,window=0,batch=1 \
           kv_len=32768,head_dim=256,heads=8,kv_heads=1,window=0,batch=1 \
           kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1; do
    "$T" bench attention --op attention_decode --shape "$s" --cache "$cache" >>"$B" 2>&1
  done
  for s in q_len=8192,kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0 \
           q_len=8192,kv_len=8192,head_dim=512,heads=8,kv_heads=1,window=0; do
    "$T" bench attention --op attention_prefill --shape "$s" --cache "$cache" >>"$B" 2>&1
  done
  "$T" bench strategies --op rmsnorm --shape rows=64,cols=2560 >>"$B" 2>&1
  # every configuration's time, not only the winners' (how each template fared)
  "$T" cache trials --cache "$cache" >"$OUT/trials.txt" 2>&1
  summary+=("bench: $(grep -c 'us' "$B") lines in bench.txt, trials in trials.txt")
fi
if [[ $what == model || $what == all ]]; then
  M="$OUT/model.txt"
  : >"$M"
  B="$T bench model --preset gemma-4-e2b --cache /tmp/model.sqlite"
  for flags in "--prompt-len 1 --decode 128" "--prompt-len 1 --decode 128 --no-pdl" \
               "--prompt-len 1 --decode 128 --separate-gating" \
               "--prompt-len 1 --decode 128 --seams kernel" \
               "--prompt-len 1 --decode 128 --seams epilogue" \
               "--prompt-len 1 --decode 128 --attention-q-prep" "--prompt-len 512 --decode 32" \
               "--prompt-len 1 --decode 128 --quantize w4a16" \
               "--prompt-len 1 --decode 128 --quantize w4a16 --quantize-head" \
               "--prompt-len 1 --decode 128 --quantize-head" \
               "--prompt-len 1 --decode 128 --quantize w4a16 --seams prologue" \
               "--prompt-len 1 --decode 128 --profile"; do
    echo "== bench model $flags" >>"$M"
    $B $flags 2>&1 | grep -vE '^tailor: (tuning|gemma4 gpu)' >>"$M"
  done
  echo "== bench model --preset gemma-4-31b --prompt-len 1 --decode 8" >>"$M"
  "$T" bench model --preset gemma-4-31b --prompt-len 1 --decode 8 --cache /tmp/model31.sqlite 2>&1 |
    grep -vE '^tailor: (tuning|gemma4 gpu)' >>"$M"
  summary+=("model: $(grep -c '^decode' "$M") decode figures in model.txt")
fi
if [[ $what == knockout ]]; then
  # what each family of kernels costs on the decode step's critical path: the step with those
  # launches skipped (bench model --knockout; outputs meaningless), bf16 then W4A16 + int4 head
  K="$OUT/knockout.txt"
  : >"$K"
  B="$T bench model --preset gemma-4-e2b --cache /tmp/model.sqlite --prompt-len 1 --decode 128"
  rest="--knockout qk_norm_rope --knockout gemma4_kv_store --knockout embed --knockout gemma4_ple"
  rest="$rest --knockout residual_norm --knockout softcap_argmax --knockout attention_decode"
  for w in "" "--quantize w4a16 --quantize-head"; do
    for k in "" "--knockout attention_decode" "--knockout qk_norm_rope --knockout gemma4_kv_store" \
             "--knockout matmul_pro:n=256 --knockout matmul:k=256 --knockout w4a16_matmul:k=256" \
             "--knockout matmul:n=262144 --knockout w4a16_matmul:n=262144 --knockout softcap_argmax" \
             "$rest" "--knockout matmul --knockout matmul_pro --knockout w4a16_matmul --knockout w4a16_glu" ""; do
      echo "== $w $k" >>"$K"
      $B $w $k 2>&1 | grep -E '^(decode|knockout|tailor: bench)' >>"$K"
    done
  done
  summary+=("knockout: $(grep -c '^decode' "$K") decode figures in knockout.txt")
fi
if [[ $what == profile ]]; then
  # ncu reports (speed of light, occupancy, warp stalls, memory) of the kernels the session-6
  # knockouts blamed: the int4 GEMV winners (an E2B MLP shape and the int4 LM head), the dense
  # GEMV at the MLP shape, the decode attention winners at 8k and at a 512-slot ring, and the
  # head_dim 256 prefill winner at 8k; ncu.txt.
  # ncu fixes the SM clock at 1.47 GHz: durations are ~1.35x the benchmarks'.
  N="$OUT/ncu.txt"
  : >"$N"
  cache=/tmp/profile.sqlite
  prof() { # prof TITLE KERNEL-NAME-REGEX COMMAND...
    local title=$1 k=$2
    shift 2
    echo "== $title" >>"$N"
    timeout 120 ncu --kernel-name "regex:$k" --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section LaunchStats --section Occupancy \
      --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
      --section SchedulerStats --section InstructionStats ${NCU_METRICS:+--metrics "$NCU_METRICS"} "$@" >>"$N" 2>&1
  }
  # PROFILE_W4A16="SHAPE ...": these int4 shapes instead (say the m = 16 and m = 1 winners at one
  # MLP shape side by side: "m=16,n=12288,k=1536,group=128 m=1,n=12288,k=1536,group=128");
  # SHAPE@FILTER profiles the best of the survivors `tune --where FILTER` keeps, in a cache of its
  # own (one configuration: "m=16,n=12288,k=1536,group=128@template=w4a16_gemv_t,ASMEM=1,RT=1,
  # WK=2,WR=2,UNROLL=2,SPLITK=1,MT=2" beside the same with ASMEM=0); PROFILE_ONLY=w4a16: nothing else;
  # NCU_METRICS="regex:..." adds metrics to every report (the stall reasons:
  # "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio")
  i=0
  for sw in ${PROFILE_W4A16:-m=1,n=6144,k=1536,group=128 m=1,n=262144,k=1536,group=128}; do
    s=${sw%%@*} c=$cache where=()
    if [[ $sw == *@* ]]; then
      i=$((i + 1)) c=/tmp/profile-where-$i.sqlite where=(--where "${sw#*@}")
    fi
    "$T" tune --op w4a16_matmul --shape "$s" --dtype bf16 --cache "$c" "${where[@]}" >>"$N" 2>&1
    prof "w4a16 ${where[*]:+${where[1]} of }$s" "w4a16_matmul__" "$T" bench w4a16 --shape "$s" --cache "$c"
  done
  [[ ${PROFILE_ONLY:-} == w4a16 ]] && summary+=("profile: $(grep -c '^== ' "$N") ncu sections in ncu.txt")
fi
if [[ $what == profile && ${PROFILE_ONLY:-} != w4a16 ]]; then
  N="$OUT/ncu.txt"
  cache=/tmp/profile.sqlite
  "$T" tune --op matmul --shape m=1,n=6144,k=1536 --dtype bf16 --cache "$cache" >/dev/null 2>&1
  prof "matmul (bf16 GEMV) winner m=1,n=6144,k=1536" "matmul__" \
    "$T" bench kernel --op matmul --shape m=1,n=6144,k=1536 --cache "$cache"
  l=kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0,batch=1
  "$T" tune --op attention_decode --shape "$l" --dtype bf16 --cache "$cache" >/dev/null 2>&1
  prof "attention_decode winner $l" "attention_decode__" \
    "$T" bench attention --op attention_decode --shape "$l" --cache "$cache"
  a=kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1
  "$T" tune --op attention_decode --shape "$a" --dtype bf16 --cache "$cache" >/dev/null 2>&1
  prof "attention_decode winner $a" "attention_decode__" \
    "$T" bench attention --op attention_decode --shape "$a" --cache "$cache"
  # prefill at head_dim 256: what limits it at ~220 TFLOP/s (latency or shared memory?)
  f=q_len=8192,kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0
  "$T" tune --op attention_prefill --shape "$f" --dtype bf16 --cache "$cache" >/dev/null 2>&1
  prof "attention_prefill winner $f" "attention_prefill__" \
    "$T" bench attention --op attention_prefill --shape "$f" --cache "$cache"
  "$T" cache trials --cache "$cache" >"$OUT/trials.txt" 2>&1
  summary+=("profile: $(grep -c '^== ' "$N") ncu sections in ncu.txt, trials in trials.txt")
fi
if [[ $what == probe ]]; then
  # the launch and DRAM-read floors (scripts/probe/stream_floor.cu, built with nvcc here)
  bash scripts/probe/run.sh >/dev/null 2>&1
  summary+=("probe: $(grep -c 'graph' "$OUT/probe.txt") floor lines in probe.txt")
fi
if [[ $what == fused ]]; then
  # session 9's unmeasured fusions verified: every survivor (quick lists) and the model's numerics
  G="$OUT/fused.txt"
  (cd build-gpu && W4A16_QUICK=1 ctest -R 'cli_gpu_w4a16|cli_gpu_small_ops' --output-on-failure) \
    >"$G" 2>&1
  (cd build-gpu && TAILOR_SOURCE_DIR=$PWD/.. TAILOR_TEST_CACHE=/tmp/g4.db \
    TAILOR_TEST_FIXTURES=e2b_w4a16_asym ./tests/test_gpu_gemma4) >>"$G" 2>&1
  summary+=("fused: $(grep -E 'tests passed|checks,' "$G" | tr '\n' ' ')")
fi
if [[ $what == fused-bench ]]; then
  # ... and measured: the default against each fusion switched off, W4A16 + int4 head and bf16
  G="$OUT/fused-bench.txt"
  : >"$G"
  B="$T bench model --preset gemma-4-e2b --cache /tmp/model.sqlite --prompt-len 1 --decode 128"
  for w in "--quantize w4a16 --quantize-head" ""; do
    for f in "" "--separate-gating" "--separate-q-prep" ""; do
      echo "== bench model $w $f" >>"$G"
      $B $w $f 2>&1 | grep -E '^(decode|tuning)' >>"$G"
    done
  done
  summary+=("fused-bench: $(grep -c '^decode' "$G") decode figures in fused-bench.txt")
fi
if [[ $what == decode-merge ]]; then
  # the decode merge tree with its partials staged in shared memory (session 14) and its root
  # spread (session 15): every decode survivor verified at four shapes, the caches benched with the
  # working tree's templates and with probe-variants/base's (scripts/probe/base_templates.sh)
  # in the same run, then the per-block timeline (scripts/probe/timeline.sh; decode-merge.txt)
  M="$OUT/decode-merge.txt"
  : >"$M"
  "$T" bench copy >>"$M" 2>&1
  # DM_VERIFY ("SHAPE DTYPE;SHAPE DTYPE...") and DM_SHAPES ("SHAPE SHAPE...") replace the lists
  dm_verify=("kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1 bf16"
             "kv_len=5000,head_dim=512,heads=8,kv_heads=2,window=0,batch=3 fp16"
             "kv_len=4096,head_dim=256,heads=4,kv_heads=1,window=3000,batch=2 bf16"
             "kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0,batch=1 fp16")
  [[ -n ${DM_VERIFY:-} ]] && IFS=';' read -r -a dm_verify <<<"$DM_VERIFY"
  verify_all "$M" attention_decode /tmp/dm-verify.sqlite "${dm_verify[@]}"
  dm_shapes=(kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0,batch=1
             kv_len=32768,head_dim=256,heads=8,kv_heads=1,window=0,batch=1
             kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1
             kv_len=32768,head_dim=512,heads=8,kv_heads=2,window=0,batch=1
             kv_len=640,head_dim=512,heads=8,kv_heads=1,window=0,batch=1)
  [[ -n ${DM_SHAPES:-} ]] && read -r -a dm_shapes <<<"$DM_SHAPES"
  for round in ${DM_ROUNDS:-1}; do
    echo "== round $round" >>"$M"
    bench_base_new "$M" /tmp/dm "${dm_shapes[@]}"
  done
  for c in /tmp/dm-base.sqlite /tmp/dm-new.sqlite; do
    [[ -e $c ]] && "$T" cache trials --cache "$c" >"$OUT/$(basename "$c" .sqlite)-trials.txt" 2>&1
  done
  [[ ${DM_TIMELINE:-1} == 1 ]] && timeout 200 bash scripts/probe/timeline.sh >/dev/null 2>&1
  summary+=("decode-merge: $(grep -c '^rc=0' "$M") of ${#dm_verify[@]} verify-all runs passed; figures in decode-merge.txt")
fi
if [[ $what == decode-flat ]]; then
  # attention_decode's flat merge (FLAT = 1, session 41) for cards below sm_90: every decode
  # survivor verified at four shapes natively and under the T4 and A10G profiles (compute_75 /
  # compute_86 code on this card), then E2B's decode shapes and 8k benched with
  # probe-variants/base's templates and the working tree's under each profile (FLAT_PROFILES:
  # "t4 a10g native" by default; decode-flat.txt, each cache's trials in df-*-trials.txt)
  F="$OUT/decode-flat.txt"
  : >"$F"
  "$T" bench copy >>"$F" 2>&1
  for prof in ${FLAT_PROFILES:-t4 a10g native}; do
    dt=bf16
    [[ $prof == t4 ]] && dt=fp16
    flags=""
    [[ $prof != native ]] && flags="--rehearse $prof"
    [[ ${FLAT_VERIFY:-1} == 1 ]] && VERIFY_FLAGS="$flags" verify_all "$F" attention_decode /tmp/df-verify-$prof.sqlite \
      "kv_len=1024,head_dim=512,heads=8,kv_heads=1,window=0,batch=1 $dt" \
      "kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1 $dt" \
      "kv_len=700,head_dim=512,heads=8,kv_heads=2,window=0,batch=3 fp16" \
      "kv_len=3000,head_dim=256,heads=4,kv_heads=1,window=1000,batch=2,prep=1 $dt"
    for side in base new; do
      tp=""
      [[ $side == base ]] && tp=$PWD/probe-variants/base/templates
      for s in ${FLAT_SHAPES:-kv_len=1024,head_dim=512,heads=8,kv_heads=1,window=0,batch=1 \
               kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1 \
               kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0,batch=1}; do
        echo "== $prof $side bench attention_decode $s" >>"$F"
        TAILOR_TEMPLATE_PATH=$tp timeout 90 "$T" bench attention --op attention_decode --shape "$s" \
          --dtype $dt $flags --cache /tmp/df-$side-$prof.sqlite >>"$F" 2>&1
      done
      "$T" cache trials --cache /tmp/df-$side-$prof.sqlite >"$OUT/df-$side-$prof-trials.txt" 2>&1
    done
  done
  summary+=("decode-flat: $(grep -c '^rc=0' "$F") verify-all runs passed, $(grep -c '^rc=' "$F") run; figures in decode-flat.txt")
fi
if [[ $what == trace ]]; then
  # the decode step's timeline: where the step's time goes launch by launch (docs/development.md)
  R="$OUT/trace.txt"
  : >"$R"
  B="$T bench model --preset gemma-4-e2b --cache /tmp/trace.sqlite --prompt-len 512"
  for w in ${TRACE_W:-bf16 w4a16}; do
    q=""
    [[ $w == w4a16 ]] && q="--quantize w4a16 --quantize-head"
    echo "== bench model $w (tunes what is missing)" >>"$R"
    timeout ${TRACE_BENCH_S:-200} $B --decode 128 $q 2>&1 | grep -vE '^tailor: (tuning|gemma4 gpu)' >>"$R"
    echo "== bench model $w --trace" >>"$R"
    timeout ${TRACE_S:-150} $B --decode 8 $q --trace >"$OUT/trace-$w.txt" 2>&1
    echo "rc=$?" >>"$R"
    grep -E '^(decode|trace of)' "$OUT/trace-$w.txt" >>"$R"
  done
  summary+=("trace: $(grep -c '^trace of' "$R") of 2 traces; trace.txt, trace-bf16.txt, trace-w4a16.txt")
fi
if [[ $what == spacer ]]; then
  S="$OUT/spacer.txt"
  : >"$S"
  for w in ${SPACER_W:-bf16 w4a16}; do
    q=""
    [[ $w == w4a16 ]] && q="--quantize w4a16 --quantize-head"
    for rep in 1 2; do
      for sp in default 1 0; do
        echo "== $w spacer=$sp" >>"$S"
        if [[ $sp == default ]]; then unset TAILOR_TIMING_SPACER; else export TAILOR_TIMING_SPACER=$sp; fi
        # the first round tunes from an empty cache (150 s ran out in session 17)
        timeout $((rep == 1 ? 300 : 150)) $T bench model --preset gemma-4-e2b $q --cache /tmp/spacer-$sp.sqlite \
          --prompt-len 512 --decode 128 2>&1 | grep -E '^(decode|tuning)' >>"$S"
      done
    done
    unset TAILOR_TIMING_SPACER
  done
  # the int4 GEMVs taking the seams as their prologue (w4a16_pro) instead of residual_norm
  # kernels (207 µs a token in session 16's trace), on the default method's cache
  for seams in prologue default; do
    echo "== w4a16 seams=$seams" >>"$S"
    f=""
    [[ $seams == prologue ]] && f="--seams prologue"
    timeout 150 $T bench model --preset gemma-4-e2b --quantize w4a16 --quantize-head $f \
      --cache /tmp/spacer-default.sqlite --prompt-len 512 --decode 128 2>&1 |
      grep -E '^(decode|tuning)' >>"$S"
  done
  summary+=("spacer: $(grep -c '^decode' "$S") decode figures; spacer.txt")
fi
if [[ $what == seams ]]; then
  # where the W4A16 decode runs its layer seams (session 17: residual_norm stages its weights
  # before the wait, which pays after the o projection but not after the 1 µs PLE projection):
  # default (prologue before 16-bit GEMVs, kernels before int4 ones), mixed (the prologue before
  # 16-bit GEMVs, the projection's epilogue before int4 ones), epilogue (matmul_seam /
  # w4a16_seam), kernel, prologue, alternating on one cache (the first round tunes; seams.txt).
  # The numerics of mixed: test_gpu_gemma4's bf16-qhead-mixed mode (a call of its own, ~4 min).
  # SEAMS_MODES: the places timed (default: all five)
  M="$OUT/seams.txt"
  : >"$M"
  for rep in 1 2; do
    for seams in ${SEAMS_MODES:-default mixed epilogue kernel prologue}; do
      echo "== w4a16 seams=$seams" >>"$M"
      f=()
      [[ $seams != default ]] && f=(--seams "$seams")
      timeout $((rep == 1 ? 300 : 150)) $T bench model --preset gemma-4-e2b --quantize w4a16 \
        --quantize-head "${f[@]}" --cache /tmp/seams.sqlite --prompt-len 512 --decode 128 2>&1 |
        grep -E '^(decode|tuning)' >>"$M"
    done
  done
  summary+=("seams: $(grep -c "^decode" "$M") decode figures; seams.txt")
fi
if [[ $what == decode-linear ]]; then
  # the cluster merge on a full layer's linear cache (session 15): every decode survivor verified
  # at three shapes, the full layer's short and long tuned lengths benched with the working
  # tree's templates and probe-variants/base's, then the preset tuned and the E2B decode benched
  # with both (base: its own attention_decode winners, the rest shared), with a kernel profile
  D="$OUT/decode-linear.txt"
  : >"$D"
  "$T" bench copy >>"$D" 2>&1
  verify_all "$D" attention_decode /tmp/dl-verify.sqlite \
    "kv_len=1024,head_dim=512,heads=8,kv_heads=1,window=0,batch=1 bf16" \
    "kv_len=700,head_dim=256,heads=8,kv_heads=2,window=0,batch=3 fp16" \
    "kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1 bf16"
  dl_shapes=(kv_len=1024,head_dim=512,heads=8,kv_heads=1,window=0,batch=1,prep=0
             kv_len=4096,head_dim=512,heads=8,kv_heads=1,window=0,batch=1,prep=0)
  bench_base_new "$D" /tmp/dl "${dl_shapes[@]}"
  echo "== tune --preset gemma-4-e2b" >>"$D"
  { time timeout ${DL_TUNE_S:-280} "$T" tune --preset gemma-4-e2b --cache /tmp/dl-model.sqlite \
      2>&1 | tail -3; } >>"$D" 2>&1
  B="$T bench model --preset gemma-4-e2b --cache /tmp/dl-model.sqlite --prompt-len 512 --decode 128"
  for run in "new" "new --quantize w4a16 --quantize-head" "base" "new --profile" "base --profile"; do
    echo "== bench model $run" >>"$D"
    if [[ ${run%% *} == base ]]; then
      [[ -d probe-variants/base/templates ]] || continue
      export TAILOR_TEMPLATE_PATH=$PWD/probe-variants/base/templates
    fi
    flags=${run#new}
    timeout 120 $B ${flags#base} 2>&1 | grep -vE '^tailor: (tuning|gemma4 gpu)' | grep -v '^ *[0-9.]* *0\.[0-4]%' >>"$D"
    unset TAILOR_TEMPLATE_PATH
  done
  summary+=("decode-linear: $(grep -c '^rc=0' "$D") of 3 verify-all runs passed; figures in decode-linear.txt")
fi
if [[ $what == attn ]]; then
  A="$OUT/attn.txt"
  (cd build-gpu && timeout 300 ctest -R cli_gpu_attention --output-on-failure) >"$OUT/attn-tests.txt" 2>&1
  summary+=("attn tests: $(grep -E 'tests passed|tests failed' "$OUT/attn-tests.txt" | tail -1)")
  : >"$A"
  "$T" bench copy >>"$A" 2>&1
  shapes=(attention_prefill:q_len=8192,kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0
          attention_prefill:q_len=8192,kv_len=8192,head_dim=512,heads=8,kv_heads=1,window=0
          attention_prefill:q_len=512,kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512
          attention_decode:kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0,batch=1
          attention_decode:kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1)
  for rep in base new; do
    for os in "${shapes[@]}"; do
      echo "== $rep ${os%%:*} ${os#*:}" >>"$A"
      if [[ $rep == base ]]; then
        [[ -d probe-variants/base/templates ]] || continue
        TAILOR_TEMPLATE_PATH=$PWD/probe-variants/base/templates "$T" bench attention \
          --op "${os%%:*}" --shape "${os#*:}" --cache /tmp/attn-base.sqlite >>"$A" 2>&1
      else
        "$T" bench attention --op "${os%%:*}" --shape "${os#*:}" --cache /tmp/attn-new.sqlite >>"$A" 2>&1
      fi
    done
  done
  # the int4 gated GEMV against what it replaces (the 2N-row GEMV, then gelu_gate)
  for n in 6144 12288; do
    for os in "w4a16_glu:m=1,n=$n,k=1536,group=128,s_ld=0,zp=0" \
              "w4a16_matmul:m=1,n=$((2 * n)),k=1536,group=128,s_ld=0,zp=0" \
              "gelu_gate:inter=$n,rows=1,u_ld=0"; do
      echo "== kernel $os" >>"$A"
      "$T" bench kernel --op "${os%%:*}" --shape "${os#*:}" --cache /tmp/attn-new.sqlite >>"$A" 2>&1
    done
  done
  summary+=("attn: $(grep -c '^==' "$A") figures in attn.txt")
fi
if [[ $what == experimental ]]; then
  W="$OUT/experimental.txt"
  : >"$W"
  verify() { # verify OP SHAPE DTYPE [flags...]
    local op=$1 shape=$2 dtype=$3; shift 3
    echo "== verify-all $op $shape $dtype $*" >>"$W"
    TAILOR_EXPERIMENTAL=1 timeout 150 "$T" tune --op "$op" --shape "$shape" --dtype "$dtype" \
      --verify-all --cache /tmp/exp-verify.sqlite "$@" >>"$W" 2>&1
    echo "rc=$?" >>"$W"
  }
  bench_exp() { # bench_exp X SHAPE SECONDS [HEADER_PREFIX]: bench w4a16 with TAILOR_EXPERIMENTAL=X
    local x=$1 s=$2 secs=$3 pre=${4:-}
    echo "== ${pre}bench TAILOR_EXPERIMENTAL=$x w4a16 $s" >>"$W"
    TAILOR_EXPERIMENTAL=$x timeout "$secs" "$T" bench w4a16 --shape "$s" \
      --cache "/tmp/exp-bench-$x.sqlite" >>"$W" 2>&1
  }
  # w4a16_wgmma_dec (session 31): the decode wgmma tiles (BM = 8, 16, 32, split k). EXP_STEP:
  # "verify" (every survivor at six shapes: m = 16 wide and split, odd m with zero points and
  # group 32 in fp16, m = 1, m = 32, a stack stride), "bench" (m = 16 and m = 1 at the MLP shapes
  # with and without it, cuBLAS in the same process), or both (default; ~10 minutes)
  # "pairs": shape by shape, most telling first, each verified then benched (exp 1 and 0, and
  # m = 1 beside it), so that a call cut short still leaves whole comparisons
  # "ws" (session 36; in the default space since session 37): w4a16_wgmma_ws, the prefill GEMM fed by a copy warpgroup through
  # mbarriers: its survivors verified (--where: the default ones are verified elsewhere) at five
  # shapes (both dtypes, zero points, groups 32 and 64, odd m and n, a token tile past m), then
  # the m = 2048 / 512 shapes benched without and with it, twice, cuBLAS in the same process
  # (WS_VERIFY="SHAPE DTYPE;..." replaces the five shapes, WS_SHAPES="S ..." the benched ones,
  # WS_ROUNDS="1" runs one round: a short call)
  if [[ ${EXP_STEP:-} == ws ]]; then
    IFS=';' read -r -a ws_verify <<<"${WS_VERIFY:-m=2048,n=6144,k=1536,group=128 bf16;m=2048,n=1536,k=6144,group=128 fp16;m=300,n=1000,k=352,group=32,zp=1 fp16;m=77,n=2056,k=1536,group=64,zp=1 bf16;m=130,n=256,k=512,group=128 bf16}"
    for sd in "${ws_verify[@]}"; do
      verify w4a16_matmul $sd --where template=w4a16_wgmma_ws
    done
    for round in ${WS_ROUNDS:-1 2}; do
      for s in ${WS_SHAPES:-m=2048,n=6144,k=1536 m=2048,n=1536,k=6144 m=512,n=6144,k=1536}; do
        for x in 0 1; do
          bench_exp "$x" "$s,group=128" 100 "round $round "
        done
      done
    done
    echo "== trials with the experimental templates (fastest first)" >>"$W"
    "$T" cache trials --cache /tmp/exp-bench-1.sqlite 2>&1 | head -120 >>"$W"
  fi
  if [[ ${EXP_STEP:-} == pairs ]]; then
    for s in m=16,n=12288,k=1536 m=16,n=1536,k=12288; do
      verify w4a16_matmul "$s,group=128" bf16
      for x in 1 0; do
        bench_exp "$x" "$s,group=128" 90
      done
      bench_exp 0 "${s/m=16/m=1},group=128" 60
    done
    verify w4a16_matmul m=13,n=1000,k=352,group=32,zp=1 fp16
    verify w4a16_matmul m=9,n=256,k=1536,group=64,s_ld=512 fp16
  fi
  if [[ ${EXP_STEP:-verify bench} == *verify* ]]; then
    verify w4a16_matmul m=16,n=12288,k=1536,group=128 bf16
    verify w4a16_matmul m=16,n=1536,k=12288,group=128 bf16
    verify w4a16_matmul m=13,n=1000,k=352,group=32,zp=1 fp16
    verify w4a16_matmul m=1,n=6144,k=1536,group=128 bf16
    verify w4a16_matmul m=32,n=1536,k=6144,group=64,zp=1 bf16
    verify w4a16_matmul m=9,n=256,k=1536,group=64,s_ld=512 fp16
  fi
  if [[ ${EXP_STEP:-verify bench} == *bench* ]]; then
    for s in m=16,n=12288,k=1536 m=16,n=1536,k=12288 m=1,n=12288,k=1536 m=1,n=1536,k=12288; do
      for x in 0 1; do
        bench_exp "$x" "$s,group=128" 100
      done
    done
    echo "== trials with the experimental templates (fastest first)" >>"$W"
    "$T" cache trials --cache /tmp/exp-bench-1.sqlite 2>&1 | head -200 >>"$W"
  fi
  summary+=("experimental: $(grep -c '^rc=0' "$W") of $(grep -c '^== verify-all' "$W") verify-all runs passed; figures in experimental.txt")
fi
if [[ $what == experimental-attn ]]; then
  W="$OUT/experimental-attn.txt"
  : >"$W"
  for sd in "q_len=1000,kv_len=1000,head_dim=256,heads=8,kv_heads=1,window=512 bf16" \
            "q_len=777,kv_len=777,head_dim=256,heads=8,kv_heads=1,window=0 bf16" \
            "q_len=300,kv_len=1300,head_dim=256,heads=8,kv_heads=2,window=1024 fp16" \
            "q_len=33,kv_len=33,head_dim=256,heads=8,kv_heads=1,window=1 fp16" \
            "q_len=777,kv_len=777,head_dim=512,heads=8,kv_heads=1,window=0 bf16"; do
    echo "== verify-all attention_prefill $sd" >>"$W"
    TAILOR_EXPERIMENTAL=1 timeout 150 "$T" tune --op attention_prefill --shape "${sd% *}" \
      --dtype "${sd#* }" --verify-all --cache /tmp/expa-verify.sqlite >>"$W" 2>&1
    echo "rc=$?" >>"$W"
  done
  for s in q_len=8192,kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0 \
           q_len=8192,kv_len=8192,head_dim=512,heads=8,kv_heads=1,window=0 \
           q_len=512,kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512; do
    for x in 0 1; do
      echo "== bench TAILOR_EXPERIMENTAL=$x attention_prefill $s" >>"$W"
      TAILOR_EXPERIMENTAL=$x timeout 120 "$T" bench attention --op attention_prefill --shape "$s" \
        --cache "/tmp/expa-bench-$x.sqlite" >>"$W" 2>&1
    done
  done
  # the experimental decode (attention_decode_wg): every survivor verified, then 8k and 32k
  for sd in "kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0,batch=1 bf16" \
            "kv_len=5000,head_dim=512,heads=8,kv_heads=2,window=0,batch=3 fp16" \
            "kv_len=4096,head_dim=256,heads=4,kv_heads=1,window=3000,batch=2 bf16"; do
    echo "== verify-all attention_decode $sd" >>"$W"
    TAILOR_EXPERIMENTAL=1 timeout 120 "$T" tune --op attention_decode --shape "${sd% *}" \
      --dtype "${sd#* }" --verify-all --cache /tmp/expa-verify.sqlite >>"$W" 2>&1
    echo "rc=$?" >>"$W"
  done
  for s in kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0,batch=1 \
           kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1; do
    for x in 0 1; do
      echo "== bench TAILOR_EXPERIMENTAL=$x attention_decode $s" >>"$W"
      TAILOR_EXPERIMENTAL=$x timeout 120 "$T" bench attention --op attention_decode --shape "$s" \
        --cache "/tmp/expa-bench-$x.sqlite" >>"$W" 2>&1
    done
  done
  echo "== trials with the experimental templates (fastest first)" >>"$W"
  "$T" cache trials --cache /tmp/expa-bench-1.sqlite 2>&1 | head -160 >>"$W"
  summary+=("experimental-attn: $(grep -c '^rc=0' "$W") of 8 verify-all runs passed; figures in experimental-attn.txt")
fi
if [[ $what == attn-wg ]]; then
  # attention_prefill_wg (VT = 0 and 1, head_dim 256 and 512): every prefill survivor verified,
  # then the 8k prefills benched and each wg configuration's time (trials; attn-wg.txt)
  W="$OUT/attn-wg.txt"
  : >"$W"
  verify_all "$W" attention_prefill /tmp/awg-verify.sqlite \
    "q_len=1000,kv_len=1000,head_dim=256,heads=8,kv_heads=1,window=512 bf16" \
    "q_len=300,kv_len=1300,head_dim=256,heads=8,kv_heads=2,window=1024 fp16" \
    "q_len=33,kv_len=33,head_dim=256,heads=8,kv_heads=1,window=1 fp16" \
    "q_len=777,kv_len=777,head_dim=512,heads=8,kv_heads=1,window=0 bf16" \
    "q_len=300,kv_len=1300,head_dim=512,heads=8,kv_heads=2,window=1024 fp16" \
    "q_len=33,kv_len=33,head_dim=512,heads=8,kv_heads=1,window=1 bf16"
  bench_attention "$W" attention_prefill /tmp/awg-bench.sqlite 150 \
    q_len=8192,kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0 \
    q_len=8192,kv_len=8192,head_dim=512,heads=8,kv_heads=1,window=0
  echo "== trials (fastest first)" >>"$W"
  "$T" cache trials --cache /tmp/awg-bench.sqlite 2>&1 | head -150 >>"$W"
  summary+=("attn-wg: $(grep -c '^rc=0' "$W") of 6 verify-all runs passed; figures in attn-wg.txt")
fi
if [[ $what == decode-wg ]]; then
  # the long-cache decode (attention_decode_wg beside the others): every decode survivor verified
  # at three shapes, then the long caches benched and each configuration's time (trials;
  # decode-wg.txt). Session 13 ran it with a TREE = {2, 3} merge-depth parameter, which lost.
  W="$OUT/decode-wg.txt"
  : >"$W"
  verify_all "$W" attention_decode /tmp/dwg-verify.sqlite \
    "kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1 bf16" \
    "kv_len=5000,head_dim=512,heads=8,kv_heads=2,window=0,batch=3 fp16" \
    "kv_len=4096,head_dim=256,heads=4,kv_heads=1,window=3000,batch=2 bf16"
  bench_attention "$W" attention_decode /tmp/dwg-bench.sqlite 90 \
    kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1 \
    kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0,batch=1 \
    kv_len=32768,head_dim=256,heads=8,kv_heads=1,window=0,batch=1
  echo "== trials (fastest first)" >>"$W"
  "$T" cache trials --cache /tmp/dwg-bench.sqlite 2>&1 | grep -E "winner|decode_wg|decode_wide" \
    | head -60 >>"$W"
  summary+=("decode-wg: $(grep -c '^rc=0' "$W") of 3 verify-all runs passed; figures in decode-wg.txt")
fi
if [[ $what == decode-scale ]]; then
  # decode attention as the cache grows wider: the same 32k head_dim 512 and 8k head_dim 256
  # caches read by 1, 2, 4 or 8 (sequence, KV head) pairs and at query groups of 4 and 8, each
  # tuned afresh; says whether batch-1 MQA's fraction of copy is the split of one pair (its merge)
  # or the stream itself (decode-scale.txt)
  D="$OUT/decode-scale.txt"
  "$T" bench copy >"$D" 2>&1
  bench_attention "$D" attention_decode /tmp/decode-scale.sqlite 90 \
    kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1 \
    kv_len=32768,head_dim=512,heads=4,kv_heads=1,window=0,batch=1 \
    kv_len=32768,head_dim=512,heads=8,kv_heads=2,window=0,batch=1 \
    kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=4 \
    kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0,batch=1 \
    kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0,batch=8 \
    kv_len=8192,head_dim=256,heads=8,kv_heads=2,window=0,batch=4
  summary+=("decode-scale: $(grep -c 'of copy' "$D") bench lines in decode-scale.txt")
fi
if [[ $what == boot ]]; then
  # first boot: every kernel shape of E2B (16-bit and W4A16 passes) tuned from an empty cache,
  # timed; then the model benches on that warm cache while the call's time lasts
  B="$OUT/boot.txt"
  { time timeout "${BOOT_TUNE_S:-420}" "$T" tune --preset gemma-4-e2b --cache /tmp/boot.sqlite; } >"$B" 2>&1
  echo "tune rc=$?" >>"$B"
  for flags in "--prompt-len 512 --decode 128 --quantize w4a16 --quantize-head" \
               "--prompt-len 512 --decode 128"; do
    echo "== bench model $flags" >>"$B"
    timeout "${BOOT_BENCH_S:-60}" "$T" bench model --preset gemma-4-e2b --cache /tmp/boot.sqlite $flags \
      >>"$B" 2>&1
  done
  summary+=("boot: $(grep -E '^real' "$B") to tune the preset; $(grep -c 'tok/s' "$B") bench lines")
fi
if [[ $what == wgmma ]]; then
  W="$OUT/wgmma.txt"
  : >"$W"
  export TAILOR_EXPERIMENTAL=1 # any experimental w4a16 space joins
  for sd in "m=2048,n=6144,k=1536,group=128 bf16" "m=300,n=1000,k=352,group=32,zp=1 fp16"; do
    echo "== verify-all w4a16_matmul $sd" >>"$W"
    timeout 100 "$T" tune --op w4a16_matmul --shape "${sd% *}" --dtype "${sd#* }" --verify-all \
      --cache /tmp/wg-verify.sqlite >>"$W" 2>&1
    echo "rc=$?" >>"$W"
  done
  # the model with the default spaces (the prefill GEMMs and attention tuned at 512 rows)
  (cd build-gpu && TAILOR_EXPERIMENTAL=0 TAILOR_SOURCE_DIR=$PWD/.. TAILOR_TEST_CACHE=/tmp/g4.db \
    TAILOR_TEST_FIXTURES=e2b_w4a16_asym timeout 150 ./tests/test_gpu_gemma4) >"$OUT/g4.txt" 2>&1
  echo "test_gpu_gemma4 rc=$?" >>"$W"
  for s in m=2048,n=6144,k=1536 m=2048,n=1536,k=6144; do
    echo "== bench w4a16 $s" >>"$W"
    timeout 60 "$T" bench w4a16 --shape "$s,group=128" --cache /tmp/wg-verify.sqlite >>"$W" 2>&1
  done
  echo "== trials (w4a16_wgmma, fastest first)" >>"$W"
  "$T" cache trials --cache /tmp/wg-verify.sqlite 2>&1 | grep -E "^[^ ]|wgmma" | head -150 >>"$W"
  summary+=("wgmma: $(grep -c '^rc=0' "$W") of 2 verify-all runs passed; $(grep 'gemma4 rc' "$W")")
fi
if [[ $what == mlp ]]; then
  # the fused int4 MLP (op w4a16_mlp): every survivor verified (MLP_VERIFY=0 skips), its trials;
  # then (MLP_BENCH=1, the default) the E2B W4A16 + int4 head decode with the two GEMVs (the
  # default) and with it (--fused-mlp), alternating on one cache (mlp.txt, mlp-trials.txt)
  M="$OUT/mlp.txt"
  : >"$M"
  # MLP_TIMELINE=1: first each phase's time, block by block (scripts/probe/mlp_timeline.sh)
  [[ ${MLP_TIMELINE:-0} == 1 ]] && bash scripts/probe/mlp_timeline.sh >/dev/null 2>&1
  if [[ ${MLP_VERIFY:-1} == 1 ]]; then
    verify_all "$M" w4a16_mlp /tmp/mlp.sqlite "m=1,n=6144,k=1536,group=128 bf16" \
      "m=1,n=12288,k=1536,group=128 bf16" "m=1,n=96,k=352,group=32,zp=1 fp16"
    [[ ${MLP_QUICK:-0} == 1 ]] || verify_all "$M" w4a16_mlp /tmp/mlp.sqlite \
      "m=1,n=10240,k=2560,group=128 bf16" "m=1,n=21504,k=5376,group=128 bf16"
    VERIFY_FLAGS="--rehearse t4" verify_all "$M" w4a16_mlp /tmp/mlp-t4.sqlite \
      "m=1,n=6144,k=1536,group=128 fp16"
    "$T" cache trials --cache /tmp/mlp.sqlite >"$OUT/mlp-trials.txt" 2>&1
  fi
  if [[ ${MLP_BENCH:-1} == 1 ]]; then
    e2b_bench w4a16 --cache /tmp/mlp.sqlite
    echo "== tune (plain benches from the cache, split then fused)" >>"$M"
    timeout 300 $B 2>&1 | grep -E '^(prefill|decode|tuning)' >>"$M"
    timeout 120 $B --fused-mlp 2>&1 | grep -E '^(prefill|decode|tuning)' >>"$M"
    for rep in 1 2; do
      for v in split --fused-mlp; do
        flags=$v
        [[ $v == split ]] && flags=""
        echo "== $v" >>"$M"
        timeout 60 $B $flags 2>&1 | grep -E '^(prefill|decode)' >>"$M"
      done
    done
  fi
  summary+=("mlp: $(grep -c '^rc=0' "$M") verify-all passed, $(grep -c '^rc=[1-9]' "$M") failed; $(grep -c '^decode' "$M") decode figures; mlp.txt")
fi
if [[ $what == queue ]]; then
  # greedy decode queued ahead (the argmax feeds the next step on the GPU; the PLE table on the
  # GPU) against steps waited for one at a time and against the PLE table on the host, on one
  # cache, alternating (queue.txt); QUEUE_W: "w4a16" (W4A16 + int4 head, default) and/or "bf16";
  # then, when QUEUE_STEP_TUNE=1, `--step-tune` on the same cache and a plain bench after it
  Q="$OUT/queue.txt"
  : >"$Q"
  for w in ${QUEUE_W:-w4a16}; do
    e2b_bench "$w" --cache /tmp/queue-$w.sqlite
    echo "== $w: tune (a plain bench from an empty cache)" >>"$Q"
    timeout 330 $B 2>&1 | grep -E '^(prefill|decode|tuning)' >>"$Q"
    IFS=, read -ra variants <<<"${QUEUE_VARIANTS:-queued,--one-by-one,--ple-host}"
    for rep in 1 2; do
      for v in "${variants[@]}"; do
        flags=$v
        [[ $v == queued ]] && flags=""
        echo "== $w $v" >>"$Q"
        timeout 60 $B $flags 2>&1 | grep -E '^(prefill|decode)' >>"$Q"
      done
    done
    if [[ ${QUEUE_STEP_TUNE:-0} == 1 ]]; then
      echo "== $w: --step-tune" >>"$Q"
      timeout 240 $B --step-tune 2>&1 | grep -vE '^tailor: (tuning|gemma4 gpu)' >>"$Q"
      echo "== $w: plain bench after step tuning" >>"$Q"
      timeout 60 $B 2>&1 | grep -E '^(prefill|decode)' >>"$Q"
    fi
  done
  summary+=("queue: $(grep -c '^decode' "$Q") decode figures; queue.txt")
fi
# verify_topk LOG: the op topk verified survivor by survivor: both templates (topk's network,
# topk_warp's register lists of 64 and 128) at seven shapes, and the T4 rehearsed at k = 128
verify_topk() {
  verify_all "$1" topk build-gpu/topk.sqlite "rows=1,n=262144,k=64 bf16" \
    "rows=3,n=262144,k=64 fp16" "rows=2,n=1000,k=7 bf16" "rows=1,n=512,k=64 bf16" \
    "rows=1,n=262144,k=128 bf16" "rows=3,n=262144,k=128 fp16" "rows=2,n=5000,k=100 bf16"
  echo "== verify-all topk rehearse t4" >>"$1"
  timeout 120 "$T" tune --op topk --shape rows=1,n=262144,k=128 --dtype fp16 --verify-all \
    --rehearse t4 --cache build-gpu/topk.sqlite >>"$1" 2>&1
  echo "rc=$?" >>"$1"
}
if [[ $what == topk ]]; then # the op topk's survivors verified (topk.txt)
  verify_topk "$OUT/topk.txt"
  summary+=("topk: $(grep -c '^rc=0' "$OUT/topk.txt") of 8 verifications passed; topk.txt")
fi
if [[ $what == sample ]]; then
  # sampled decoding: the op topk verified survivor by survivor (the candidates a sampled step
  # downloads), then the E2B decode with Gemma's sampling defaults, each step downloading its
  # whole row (--sample rows) or its 128 best (--sample top), beside greedy, alternating on one
  # cache (SAMPLE_W: "w4a16" = W4A16 + int4 head, default, and/or "bf16"; the caches live in
  # build-gpu/ so that a later call on the same machine finds them; sample.txt)
  S="$OUT/sample.txt"
  : >"$S"
  verify_topk "$S"
  for w in ${SAMPLE_W:-w4a16}; do
    e2b_bench "$w" --cache build-gpu/sample-$w.sqlite
    if [[ -n ${SAMPLE_QUICK_TUNE:-} && $w == bf16 ]]; then # 2 random trials a shape: fast picks
      echo "== $w: tune --preset, random, 2 trials" >>"$S"
      timeout 200 "$T" tune --preset gemma-4-e2b --dtype bf16 --strategy random --trials 2 \
        --cache build-gpu/sample-$w.sqlite 2>&1 | tail -2 >>"$S"
    fi
    echo "== $w: a plain bench (tunes what the cache lacks)" >>"$S"
    timeout "${SAMPLE_TUNE_S:-330}" $B 2>&1 | grep -E '^(prefill|decode|tuning)' >>"$S"
    for rep in 1 2; do
      for flags in "" "--sample rows" "--sample top"; do
        echo "== $w ${flags:-greedy}" >>"$S"
        timeout 60 $B $flags 2>&1 | grep -E '^(prefill|decode)' >>"$S"
      done
    done
  done
  summary+=("sample: $(grep -c '^rc=0' "$S") of 8 topk verifications passed, $(grep -c '^decode [0-9]' "$S") decode figures; sample.txt")
fi
if [[ $what == carveout-kernels ]]; then
  # single kernels tuned and benched under each preferred carveout in a cache of its own
  # (TAILOR_CARVEOUT; the tuner picks under the carveout it runs with; the cache key holds any
  # but the default, "|carveout=V", so one cache would serve as well): the W4A16 decode shapes,
  # m = 16 among them, whose staged configurations ask 53 KB a block (one block an SM at 25 %:
  # ~57 KB of shared memory), and the long-cache decode
  # attention of issue 5 (CK_P: the carveouts, default "25 driver 100"; CK_W4, CK_ATTN: the
  # shapes; two rounds; carveout-kernels.txt, each cache's trials in ck-trials-P.txt)
  K="$OUT/carveout-kernels.txt"
  : >"$K"
  for round in 1 2; do
    for cv in ${CK_P:-25 driver 100}; do
      for s in ${CK_W4:-m=16,n=12288,k=1536,group=128 m=1,n=12288,k=1536,group=128 m=16,n=1536,k=12288,group=128}; do
        echo "== round $round carveout $cv w4a16 $s" >>"$K"
        TAILOR_CARVEOUT=$cv timeout 90 "$T" bench w4a16 --shape "$s" --cache "/tmp/ck-$cv.sqlite" >>"$K" 2>&1
      done
      for s in ${CK_ATTN:-kv_len=32768,head_dim=256,heads=8,kv_heads=1,window=0,batch=1 kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1 kv_len=8192,head_dim=256,heads=8,kv_heads=1,window=0,batch=1}; do
        echo "== round $round carveout $cv attention_decode $s" >>"$K"
        TAILOR_CARVEOUT=$cv timeout 90 "$T" bench attention --op attention_decode --shape "$s" \
          --cache "/tmp/ck-$cv.sqlite" >>"$K" 2>&1
      done
    done
  done
  for cv in ${CK_P:-25 driver 100}; do
    "$T" cache trials --cache "/tmp/ck-$cv.sqlite" >"$OUT/ck-trials-$cv.txt" 2>&1
  done
  summary+=("carveout-kernels: $(grep -cE ' us ' "$K") bench lines; carveout-kernels.txt")
fi
if [[ $what == carveout ]]; then
  # the E2B decode with every kernel preferring one shared-memory carveout (TAILOR_CARVEOUT;
  # runtime/cuda.c, 25 % by default since session 31) against the driver's choice per kernel
  # (TAILOR_CARVEOUT=driver), alternating on one cache (since the cache key holds a carveout
  # other than the default, a run under driver or 50 finds none of the 25 % winners: it tunes its
  # own within the bench's timeout, where it once ran the 25 % picks)
  # (CARVE_W: "w4a16" = W4A16 + int4 head, default, and/or "bf16"; CARVE_P: the percentages,
  # default "25 50"; session 30 on an H100: prefill +19-23 % at 25-75 %, decode flat at 25-50 %,
  # -6 % at 100, -13 % at 0; carveout.txt).
  # CARVE_BOOT=1: one full first boot (`tune --preset gemma-4-e2b`, both weight kinds) into one
  # cache first, so that both benches run fully tuned winners
  C="$OUT/carveout.txt"
  : >"$C"
  if [[ ${CARVE_BOOT:-0} == 1 ]]; then
    { time timeout "${BOOT_TUNE_S:-330}" "$T" tune --preset gemma-4-e2b \
        --cache build-gpu/carve.sqlite; } 2>&1 | tail -5 >>"$C"
  fi
  for w in ${CARVE_W:-w4a16}; do
    cache=build-gpu/carve-$w.sqlite
    [[ ${CARVE_BOOT:-0} == 1 ]] && cache=build-gpu/carve.sqlite
    e2b_bench "$w" --cache "$cache"
    echo "== $w: a plain bench (tunes what the cache lacks)" >>"$C"
    timeout "${CARVE_TUNE_S:-330}" $B 2>&1 | grep -E '^(prefill|decode|tuning)' >>"$C"
    for rep in 1 2; do
      for cv in driver ${CARVE_P:-25 50}; do
        echo "== $w carveout $cv" >>"$C"
        TAILOR_CARVEOUT=$cv timeout 60 $B 2>&1 | grep -E '^(prefill|decode)|error' >>"$C"
      done
    done
  done
  summary+=("carveout: $(grep -c '^decode [0-9]' "$C") decode figures; carveout.txt")
fi
if [[ $what == step-tune ]]; then
  # step tuning (tuner/step_tune.h): the swap machinery on an rmsnorm shape (test_gpu_step_tune),
  # then for each of STEP_W (default "w4a16"; ~7 minutes each: STEP_W=bf16 in a second call) the E2B
  # decode before and after `bench model --step-tune` in one process, then a plain bench of the
  # same cache in a new process (the kept choices come from the cache), alternating with a copy
  # of the cache taken before the step tuning (step-tune.txt)
  P="$OUT/step-tune.txt"
  : >"$P"
  (cd build-gpu && TAILOR_SOURCE_DIR=$PWD/.. timeout 120 ./tests/test_gpu_step_tune) >>"$P" 2>&1
  echo "test_gpu_step_tune rc=$?" >>"$P"
  for w in ${STEP_W:-w4a16}; do
    e2b_bench "$w"
    echo "== $w: tune (a plain bench from an empty cache)" >>"$P"
    timeout 330 $B --cache /tmp/step-$w.sqlite 2>&1 | grep -E '^(decode|tuning)' >>"$P"
    cp /tmp/step-$w.sqlite /tmp/step-$w-before.sqlite
    echo "== $w: --step-tune" >>"$P"
    timeout 240 $B --cache /tmp/step-$w.sqlite --step-tune 2>&1 | grep -vE '^tailor: (tuning|gemma4 gpu)' >>"$P"
    echo "rc=$?" >>"$P"
    for cache in before "" before ""; do
      echo "== $w: plain bench on the cache ${cache:-after}" >>"$P"
      timeout 60 $B --cache /tmp/step-$w${cache:+-$cache}.sqlite 2>&1 | grep -E '^decode' >>"$P"
    done
  done
  summary+=("step-tune: $(grep -c '^step tuning: .* kept' "$P") step tunings, $(grep -c '^decode' "$P") decode figures; step-tune.txt")
fi
if [[ $what == cards ]]; then
  # a 99 KB sm_86 card rehearsed (the A10G: compute_86 PTX, bf16, its budget, no PDL): the head_dim
  # 512 attention tiles only such cards plan (16 keys with cp.async and m16n8k16) verified survivor
  # by survivor, then test_gpu_gemma4's rehearse-a10g mode on every fixture (plus bf16 as the
  # same run's reference), then `tailor run`'s memory check refusing what cannot fit (cards.txt)
  C="$OUT/cards.txt"
  : >"$C"
  VERIFY_FLAGS="--rehearse a10g" verify_all "$C" attention_decode build-gpu/cards.sqlite \
    "kv_len=4096,head_dim=512,heads=8,kv_heads=1,window=0,batch=2,prep=1 bf16" \
    "kv_len=9000,head_dim=512,heads=32,kv_heads=4,window=0,batch=3 fp16" \
    "kv_len=600,head_dim=256,heads=8,kv_heads=1,window=512,batch=2,prep=1 bf16"
  VERIFY_FLAGS="--rehearse a10g" verify_all "$C" attention_prefill build-gpu/cards.sqlite \
    "q_len=200,kv_len=300,head_dim=512,heads=8,kv_heads=1,window=0 bf16" \
    "q_len=129,kv_len=2000,head_dim=512,heads=32,kv_heads=4,window=0 fp16" \
    "q_len=40,kv_len=40,head_dim=512,heads=4,kv_heads=1,window=1 bf16"
  (cd build-gpu && TAILOR_SOURCE_DIR=$PWD/.. TAILOR_TEST_MODES=bf16,rehearse-a10g \
     timeout 400 ./tests/test_gpu_gemma4) >>"$C" 2>&1
  echo "test_gpu_gemma4 rc=$?" >>"$C"
  # the memory check against the live free memory: 31B with a million positions (~300 GB of KV
  # cache) is refused in one sentence before a byte is uploaded (rc=1 within seconds)
  echo "== 31B, 1,000,000 positions (expect the refusal at once)" >>"$C"
  t0=$SECONDS
  timeout 60 "$T" bench model --preset gemma-4-31b --prompt-len 1 --decode 1000000 \
    --cache build-gpu/cards.sqlite >>"$C" 2>&1
  echo "rc=$? after $((SECONDS - t0)) s" >>"$C"
  summary+=("cards: $(grep -c '^rc=0' "$C") of 6 a10g verifications passed; memory check: $(grep -c 'of GPU memory' "$C") refusal; $(grep 'test_gpu_gemma4' "$C" | tail -2 | tr '\n' ' '); cards.txt")
fi
if [[ $what == w4-base-new ]]; then
  # an int4 template edit timed against probe-variants/base's templates (scripts/probe/
  # base_templates.sh REV) in the same run: every survivor verified at W4_VERIFY's shapes (op
  # w4a16_matmul, or w4a16_glu with a "glu:" prefix), then each of W4_SHAPES benched base, new,
  # base, new (own caches: the template hashes differ); w4-base-new.txt
  W="$OUT/w4-base-new.txt"
  : >"$W"
  # W4_NEW_EXPERIMENTAL=1: the new side (verify-all included) with TAILOR_EXPERIMENTAL=1, the
  # base side without (an experimental space of the working tree against the default spaces)
  [[ -n ${W4_NEW_EXPERIMENTAL:-} ]] && export TAILOR_EXPERIMENTAL=1
  for sd in ${W4_VERIFY:-m=16,n=12288,k=1536,group=128:bf16 m=1,n=12288,k=1536,group=128:bf16 m=3,n=200,k=352,group=32,zp=1:fp16 glu:m=1,n=6144,k=1536,group=128:bf16}; do
    op=w4a16_matmul
    [[ $sd == glu:* ]] && op=w4a16_glu && sd=${sd#glu:}
    verify_all "$W" "$op" /tmp/w4-verify.sqlite "${sd%:*} ${sd##*:}"
  done
  for round in 1 2; do
    for side in base new; do
      if [[ $side == base ]]; then
        [[ -d probe-variants/base/templates ]] || continue
        export TAILOR_TEMPLATE_PATH=$PWD/probe-variants/base/templates
        [[ -n ${W4_NEW_EXPERIMENTAL:-} ]] && unset TAILOR_EXPERIMENTAL
      else
        unset TAILOR_TEMPLATE_PATH
        [[ -n ${W4_NEW_EXPERIMENTAL:-} ]] && export TAILOR_EXPERIMENTAL=1
      fi
      for s in ${W4_SHAPES:-m=1,n=12288,k=1536,group=128 m=16,n=12288,k=1536,group=128 m=1,n=1536,k=12288,group=128 m=16,n=1536,k=12288,group=128 m=1,n=262144,k=1536,group=128}; do
        echo "== round $round $side $s" >>"$W"
        if [[ $s == glu:* ]]; then # the gated GEMV: bench kernel (no cuBLAS counterpart)
          timeout 90 "$T" bench kernel --op w4a16_glu --shape "${s#glu:}" --cache "/tmp/w4-$side.sqlite" >>"$W" 2>&1
        else
          timeout "${W4_BENCH_TIMEOUT:-90}" "$T" bench w4a16 --shape "$s" --cache "/tmp/w4-$side.sqlite" >>"$W" 2>&1
        fi
      done
    done
  done
  unset TAILOR_TEMPLATE_PATH
  "$T" cache trials --cache /tmp/w4-new.sqlite >"$OUT/w4-trials.txt" 2>&1 # every configuration's time
  summary+=("w4-base-new: $(grep -c '^rc=0' "$W") verify-all runs passed of $(grep -c '^rc=' "$W"); $(grep -c 'cuBLAS' "$W") bench lines; w4-base-new.txt")
fi
if [[ $what == sanitize ]]; then
  # tests/cli_gpu_sanitize.sh alone, verbose (SAN_TOOLS, SAN_ONLY pass through; sanitize.txt)
  Z="$OUT/sanitize.txt"
  (cd build-gpu && ctest -R '^cli_gpu_sanitize$' -V) >"$Z" 2>&1
  summary+=("sanitize: $(grep -cE '^== .*rc 0$' "$Z") of $(grep -c '^== ' "$Z") runs clean; $(grep -E 'tests passed|tests failed' "$Z")")
fi
if [[ $what == order ]]; then
  # activation order (session 38): every gather_cols survivor verified (the int4 inputs' widths,
  # a prefill's rows, an odd width, the T4), then test_gpu_gemma4 on the regrouped fixture (six
  # modes) and, while ORDER_S lasts, e2b_w4a16_asym (order.txt, gemma4.txt)
  R="$OUT/order.txt"
  : >"$R"
  for sd in "rows=1,cols=1536 bf16" "rows=1,cols=12288 bf16" "rows=33,cols=21504 bf16" \
            "rows=512,cols=6144 bf16" "rows=5,cols=1544 fp16"; do
    echo "== verify-all gather_cols $sd" >>"$R"
    timeout 60 "$T" tune --op gather_cols --shape "${sd% *}" --dtype "${sd#* }" --verify-all \
      --cache /tmp/order.sqlite >>"$R" 2>&1
    echo "rc=$?" >>"$R"
  done
  echo "== verify-all gather_cols rows=7,cols=1536 fp16 --rehearse t4" >>"$R"
  timeout 60 "$T" tune --op gather_cols --shape rows=7,cols=1536 --dtype fp16 --verify-all \
    --rehearse t4 --cache /tmp/order.sqlite >>"$R" 2>&1
  echo "rc=$?" >>"$R"
  (cd build-gpu && env TAILOR_SOURCE_DIR=$PWD/.. TAILOR_TEST_FIXTURES=${ORDER_FIXTURES:-regrouped,e2b_w4a16_asym} \
    timeout "${ORDER_S:-420}" ./tests/test_gpu_gemma4) >"$OUT/gemma4.txt" 2>&1
  echo "rc=$?" >>"$OUT/gemma4.txt"
  summary+=("order: gather_cols verify $(grep -c '^rc=0' "$R") of $(grep -c '^rc=' "$R") rc=0; test_gpu_gemma4: $(tail -2 "$OUT/gemma4.txt" | tr '\n' ' ')")
fi
if [[ $what == order-bench ]]; then
  # what the gathers cost: E2B W4A16 + int4 head, random weights, every int4 linear in an
  # activation order (--act-order) or not, alternating on one cache tuned for the preset first
  # (order-bench.txt)
  B="$OUT/order-bench.txt"
  { time timeout "${BOOT_TUNE_S:-300}" "$T" tune --preset gemma-4-e2b --cache /tmp/ob.sqlite; } >"$B" 2>&1
  for r in 1 2; do
    for flags in "" "--act-order"; do
      echo "== round $r bench model --quantize w4a16 --quantize-head $flags" >>"$B"
      timeout 90 "$T" bench model --preset gemma-4-e2b --quantize w4a16 --quantize-head \
        --prompt-len 512 --decode 128 --cache /tmp/ob.sqlite $flags 2>&1 |
        grep -vE '^tailor: (tuning|gemma4 gpu)' >>"$B"
    done
  done
  summary+=("order-bench: $(grep -c '^decode' "$B") decode figures in order-bench.txt")
fi
if [[ $what == pdl ]]; then
  # one variant a call (~7 minutes with the build): PDL_NAMES="attn" for the second
  bash scripts/probe/pdl_variants.sh ${PDL_NAMES:-small} >/dev/null 2>&1
  summary+=("pdl: $(grep -c 'decode 128' "$OUT/pdl.txt") decode figures in pdl.txt")
fi
printf '%s\n' "${summary[@]}"
