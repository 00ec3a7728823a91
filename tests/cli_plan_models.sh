#!/usr/bin/env bash
# cli_plan_models.sh — `tailor plan --preset` without a GPU: every kernel shape Gemma 4 E2B, E4B
# and 31B need (16-bit and W4A16) keeps at least one survivor on every GPU profile, from the T4
# to the H200. A 99 KB card (A10G, L4, RTX 3090/4090) once planned nothing for head_dim 512
# attention, so those models could not run there at all. Also: a shape left without survivors
# is named with its nearest refusal and the exit status is 1, and the memory line (the loader's
# dry pass) says which loads fit the card.
set -u
T=${TAILOR_BIN:?}
S=${TAILOR_SOURCE_DIR:?}
fail=0
check() { local what=$1; shift; if "$@"; then :; else echo "FAILED: $what"; fail=1; fi; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# E2B on every profile; E4B and 31B on one card of each budget class (64, 99, 164, 227 KB)
for dev in t4 l4 a10g rtx3090 rtx4090 a100-40gb a100-80gb h100 h200; do
  models=gemma-4-e2b
  case $dev in t4 | a10g | rtx4090 | a100-40gb | h100) models="$models gemma-4-e4b gemma-4-31b" ;; esac
  for model in $models; do
    "$T" plan --device "$dev" --preset "$model" --quiet >"$tmp/out" 2>&1; rc=$?
    check "$model on $dev: every kernel shape has a survivor (rc=$rc: $(head -c 600 "$tmp/out"))" \
      test $rc -eq 0
    check "$model on $dev: the summary line says so" \
      grep -Eq "kernel shapes, 0 without a survivor; [1-9][0-9]* survivors, [1-9][0-9]* distinct kernels" "$tmp/out"
  done
done

# the head_dim 512 attention shapes on a 99 KB card: the small tiles, 16 keys
out=$("$T" plan --device a10g --preset gemma-4-e2b 2>&1)
check "a10g: the full layers' decode attention keeps survivors" \
  grep -Eq "^attention_decode +batch=1,head_dim=512,.*kv_len=4096,.* +[1-9][0-9]* of +[0-9]+ survive" <<<"$out"
check "a10g: head_dim 512 prefill keeps survivors" \
  grep -Eq "^attention_prefill +head_dim=512,.* +[1-9][0-9]* of +[0-9]+ survive" <<<"$out"
out=$("$T" plan --device a10g --op attention_decode \
        --shape kv_len=4096,head_dim=512,heads=8,kv_heads=1,window=0,batch=1 2>&1)
check "a10g: head_dim 512 decode runs 16-key tiles" grep -q "^  attention_decode .*BN=16 " <<<"$out"
check "a10g: 32-key tiles refused with the arithmetic" \
  grep -q "BN=32 .*needs 151,424 B shared memory per block; NVIDIA A10G (sm_86) allows 101,376 B" <<<"$out"
# the big cards' plans are the large tiles, as before: no 16-key tile in attention_decode.cu's
# survivors (attention_decode_wide always runs 16-key groups), no 16-key prefill tile
for dev in h200 a100-40gb; do
  out=$("$T" plan --device $dev --op attention_decode \
          --shape kv_len=4096,head_dim=512,heads=8,kv_heads=1,window=0,batch=1 2>&1)
  check "$dev: head_dim 512 decode keeps 32-key tiles" grep -Eq "^  attention_decode +ASYNC=1 BN=32 " <<<"$out"
  check "$dev: head_dim 512 decode has no 16-key attention_decode tile" \
    bash -c "! grep -Eq '^  attention_decode +ASYNC=1 BN=16 ' <<<\"\$0\"" "$out"
  out=$("$T" plan --device $dev --op attention_prefill \
          --shape q_len=512,kv_len=512,head_dim=512,heads=8,kv_heads=1,window=0 2>&1)
  check "$dev: head_dim 512 prefill has survivors and no 16-key tile" \
    bash -c "grep -Eq '^  attention_prefill +ASYNC=1 BN=(32|64) ' <<<\"\$0\" &&
             ! grep -Eq '^  attention_prefill +ASYNC=1 BN=16 ' <<<\"\$0\"" "$out"
done

# issue 4's rehearsal: on the T4 profile every W4A16 linear of E2B, E4B and 31B (the presets'
# own shapes, stacks included) keeps survivors at m = 1, 16 and 2048, in fp16
for model in gemma-4-e2b gemma-4-e4b gemma-4-31b; do
  "$T" plan --device t4 --preset "$model" 2>/dev/null | awk '$1 == "w4a16_matmul" {print $2}'
done | sed -E 's/(^|,)m=[0-9]+//; s/^,//' | sort -u >"$tmp/w4shapes"
nw4=$(wc -l <"$tmp/w4shapes")
check "the presets list W4A16 linears ($nw4)" test "$nw4" -ge 20
# (117 plans: one process a CPU; each prints a line for a shape without survivors)
for m in 1 16 2048; do sed "s/^/m=$m,/" "$tmp/w4shapes"; done |
  xargs -P "$(nproc)" -I{} sh -c '"$0" plan --device t4 --dtype fp16 --op w4a16_matmul \
    --shape "$1" --quiet 2>&1 | grep -Eq "candidates, [1-9][0-9]* survive" ||
    echo "t4 fp16 w4a16_matmul $1 has no survivor"' "$T" {} >"$tmp/w4none"
check "every W4A16 linear keeps survivors on the T4 at m = 1, 16, 2048 ($(head -3 "$tmp/w4none"))" \
  test ! -s "$tmp/w4none"

# memory from the loader's dry pass: 31B in 16 bits does not fit a 24 GB card, W4A16 does
out=$("$T" plan --device l4 --preset gemma-4-31b --quiet 2>&1)
check "31B on the L4: memory line with both loads" \
  grep -Eq "^memory at 4096 positions: as loaded 6[0-9]\.[0-9]+ GB .*; --quantize w4a16 --quantize-head (1[6-9]|2[0-3])\.[0-9]+ GB .*NVIDIA L4 has 25\.8 GB in all, ~23\.8 GB for a model: as loaded does not fit$" <<<"$out"
out=$("$T" plan --device t4 --preset gemma-4-e2b --quiet 2>&1)
check "E2B on the T4: fits, and the PLE table is named" \
  grep -Eq "^memory at 4096 positions: as loaded [0-9.]+ GB .* \+ the PLE table 4\.70 GB .*Tesla T4 has 17\.2 GB in all, ~15\.2 GB for a model$" <<<"$out"

# JSON: one entry per shape with its counts
"$T" plan --device l4 --preset gemma-4-e2b --json >"$tmp/json" 2>&1; rc=$?
check "json: exit 0 (rc=$rc)" test $rc -eq 0
check "json: shapes_without_survivors 0 and an entry per listed shape" python3 - "$tmp/json" \
  "$("$T" tune --preset gemma-4-e2b --list | wc -l)" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["device"] == "l4" and d["model"] == "gemma-4-e2b" and d["dtype"] == "bf16", d
assert d["shapes_without_survivors"] == 0
assert len(d["shapes"]) == int(sys.argv[2]), (len(d["shapes"]), sys.argv[2])
assert all(s["survivors"] > 0 and s["candidates"] >= s["survivors"] for s in d["shapes"])
m = d["memory"]
assert m["positions"] == 4096 and m["device_bytes"] == 24 * 2**30, m
assert m["smallest"]["weights"] < m["as_loaded"]["weights"], m
assert m["as_loaded"]["ple_table"] == 262144 * 35 * 256 * 2, m
assert m["smallest_flags"] == "--quantize w4a16 --quantize-head", m
assert d["survivors"] == sum(s["survivors"] for s in d["shapes"]), d["survivors"]
assert 0 < d["kernels"] <= d["survivors"], (d["kernels"], d["survivors"])
EOF

# a space that fits nowhere: residual_norm asking 16 MiB of shared memory per block
mkdir -p "$tmp/tpl"
sed 's/smem_dynamic = function(p, shape, dtype, device) return 0 end/smem_dynamic = function() return 16777216 end/' \
  "$S/templates/residual_norm.lua" >"$tmp/tpl/residual_norm.lua"
check "the test's space override took" grep -q 16777216 "$tmp/tpl/residual_norm.lua"
TAILOR_TEMPLATE_PATH="$tmp/tpl" "$T" plan --device h200 --preset gemma-4-e2b --quiet \
  >"$tmp/out" 2>&1; rc=$?
check "a shape without survivors exits 1 (rc=$rc)" test $rc -eq 1
check "it is named, with its refusal class" \
  grep -Eq "^residual_norm +.* 0 of +[0-9]+ survive \(.*refused-smem [0-9]+" "$tmp/out"
check "its nearest refusal gives the arithmetic" \
  grep -Eq "nearest: residual_norm .*needs 16,7[0-9,]+ B shared memory per block; NVIDIA H200" "$tmp/out"
check "--quiet lists only the shapes without survivors" \
  test "$(grep -c ' survive' "$tmp/out")" -eq "$(grep -c '^residual_norm ' "$tmp/out")"
check "the summary counts them" \
  grep -Eq "gemma-4-e2b on NVIDIA H200 \(bf16\): [0-9]+ kernel shapes, [1-9][0-9]* without a survivor" "$tmp/out"

# usage errors: one sentence, exit 2
"$T" plan --device t4 --preset gemma-4-e2b --op rmsnorm >/dev/null 2>"$tmp/err"; rc=$?
check "--preset with --op is a usage error (rc=$rc)" test $rc -eq 2
check "... saying which to give" grep -q "give --op with --shape, or --preset, or --model" "$tmp/err"
for flag in --compile --ptx; do
  "$T" plan --device t4 --preset gemma-4-e2b $flag >/dev/null 2>"$tmp/err"; rc=$?
  check "--preset with $flag is a usage error (rc=$rc)" test $rc -eq 2
done
"$T" plan --preset gemma-4-e2b >/dev/null 2>"$tmp/err"; rc=$?
check "--preset without --device is a usage error (rc=$rc)" test $rc -eq 2
"$T" plan --device t4 --preset gemma-4-e9b >/dev/null 2>"$tmp/err"; rc=$?
check "an unknown preset fails (rc=$rc)" test $rc -ne 0
check "... listing the known ones" grep -q "preset 'gemma-4-e9b' is unknown (known: gemma-4-e2b" "$tmp/err"
"$T" plan --device t4 --model "$tmp/nowhere" >/dev/null 2>"$tmp/err"; rc=$?
check "a missing model directory fails naming the file (rc=$rc)" \
  grep -q "$tmp/nowhere/config.json" "$tmp/err"

exit $fail
