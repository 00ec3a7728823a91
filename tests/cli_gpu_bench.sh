#!/usr/bin/env bash
# cli_gpu_bench.sh — the benchmarks' figures on a live GPU (issue 4 item 4, issue 5 item 5,
# issue 7 item 8): `tailor bench w4a16` gives the time, GB/s, the fraction of the copy bandwidth
# measured in the same run, TFLOP/s and the cuBLAS dense ratio; `bench attention` the decode
# GB/s against the copy figure and the prefill TFLOP/s of the work the mask keeps; `bench model`
# on the tiny fixture every figure issue 7 names (prefill and decode tok/s, time to first token,
# peak host memory, GPU memory, decode against the bandwidth bound), each a sane number. Timing
# is not asserted (that is what the benchmarks are for): only that the figures exist and hold
# together. Skips (77) without a GPU.
set -u
source "$(dirname "$0")/gpu_preamble.sh" # T, the skip without a GPU, $tmp, fail, check
S=${TAILOR_SOURCE_DIR:?}

# one kernel benchmark's JSON line: KIND LINE -> python checks of its fields (exit 1 on a miss)
kernel_ok() {
  python3 - "$1" "$2" <<'PY'
import json, sys
kind, o = sys.argv[1], json.loads(sys.argv[2])
assert o["us"] > 0 and o["gb_per_s"] > 0 and o["copy_gb_per_s"] > 100, o
# the figure is bytes over time, and its fraction is that over the copy measured in the run
assert abs(o["fraction_of_copy"] - o["gb_per_s"] / o["copy_gb_per_s"]) < 1e-3 * max(1, o["fraction_of_copy"]), o
assert 0 < o["fraction_of_copy"] < 2, o
if kind == "w4a16":
    assert o["tflops"] > 0 and o["cublas_dense_us"] > 0, o
    assert abs(o["speedup_vs_cublas"] - o["cublas_dense_us"] / o["us"]) < 1e-6 * o["speedup_vs_cublas"] + 1e-9, o
if kind == "prefill":
    assert o["tflops"] > 0, o
PY
}

out=$("$T" bench w4a16 --shape m=1,n=2048,k=1536,group=128 --cache "$tmp/c.db" --json 2>"$tmp/err" | tail -1)
check "bench w4a16: time, GB/s, fraction of copy, TFLOP/s, cuBLAS ratio ($out $(tail -1 "$tmp/err"))" \
  kernel_ok w4a16 "$out"
dec=kv_len=4096,head_dim=256,heads=8,kv_heads=1,window=0,batch=1
out=$("$T" bench attention --op attention_decode --shape "$dec" --cache "$tmp/c.db" --json 2>"$tmp/err" | tail -1)
check "bench attention decode: GB/s against the copy ($out $(tail -1 "$tmp/err"))" kernel_ok decode "$out"
pre=q_len=256,kv_len=256,head_dim=256,heads=8,kv_heads=1,window=128
out=$("$T" bench attention --op attention_prefill --shape "$pre" --cache "$tmp/c.db" --json 2>"$tmp/err" | tail -1)
check "bench attention prefill: TFLOP/s ($out $(tail -1 "$tmp/err"))" kernel_ok prefill "$out"

# the model on the tiny fixture: every figure, from its JSON line
out=$("$T" bench model --model "$S/tests/fixtures/e2b_flat" --prompt-len 16 --decode 8 \
        --cache "$tmp/c.db" --json 2>"$tmp/err" | tail -1)
check "bench model: every figure issue 7 names ($out $(tail -1 "$tmp/err"))" python3 - "$out" <<'PY'
import json, sys
o = json.loads(sys.argv[1])
for k in ("prefill_tok_s", "decode_tok_s", "ttft_ms", "peak_host_bytes", "gpu_bytes",
          "weight_bytes_token", "copy_bw", "bound_tok_s"):
    assert o[k] > 0, (k, o)
assert abs(o["bound_tok_s"] - o["copy_bw"] / o["weight_bytes_token"]) < 1e-3 * o["bound_tok_s"], o
assert abs(o["fraction_of_bound"] - o["decode_tok_s"] / o["bound_tok_s"]) < 1e-2, o
assert o["graph"] == 1 and o["w4a16"] == 0, o
PY
[[ $fail -eq 0 ]] && echo "cli_gpu_bench: all checks passed"
exit $fail
