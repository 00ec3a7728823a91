#!/usr/bin/env bash
# cli_plan_compile.sh — `tailor plan --compile` without a GPU: every template compiles with NVRTC
# for sm_90 (bf16) and sm_75 (fp16, the T4), the attention ones also for sm_86 (a 99 KB card's
# small tiles at head_dim 512), with no spills where the space promises none, the
# compiler's report is printed per survivor, and a template that does not compile is named
# with a non-zero exit (the CPU-side guard for template edits).
set -u
T=${TAILOR_BIN:?}
export TAILOR_EXPERIMENTAL=1 # experimental templates compile too (their guard is this script)
unset TAILOR_CARVEOUT        # the report's blocks an SM under the default 25 % carveout
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
check() { local what=$1; shift; if "$@"; then :; else echo "FAILED: $what"; fail=1; fi; }
# E2B's sliding ring on sm_90: its survivors include the cluster merge (attention_decode CLUSTER=1)
ring="kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1"

# one shape per template family and architecture: every template of every op gets compiled
while read -r dev dtype op shape; do
  "$T" plan --device "$dev" --dtype "$dtype" --op "$op" --shape "$shape" --compile --quiet \
    >"$tmp/out" 2>"$tmp/err"; rc=$?
  n=$(grep -c "regs, spills" "$tmp/out")
  check "$op $shape on $dev compiles (rc=$rc: $(head -c 300 "$tmp/err"))" test $rc -eq 0
  check "$op $shape on $dev: every survivor has a compiler report" \
    test "$n" -eq "$(grep -c '^  [a-z]' "$tmp/out")"
  check "$op $shape on $dev: at least one survivor" test "$n" -gt 0
  spills=$(grep "regs, spills" "$tmp/out" | grep -v "spills 0/0 B" | head -3)
  check "$op $shape on $dev: no spills ($spills)" test -z "$spills"
  echo "$dev $dtype $op $shape: $n compiled"
  if [[ "$dev $op $shape" == "h200 attention_decode $ring" ]]; then cp "$tmp/out" "$tmp/ring"; fi
  if [[ "$dev $op" == "h200 w4a16_matmul" ]]; then cat "$tmp/out" >>"$tmp/w4h200"; fi
  if [[ "$dev $op" == "h200 attention_prefill" ]]; then cat "$tmp/out" >>"$tmp/prefill_h200"; fi
done <<'LIST'
h200 bf16 matmul m=1,n=2048,k=1536
h200 bf16 matmul_glu m=1,n=6144,k=1536
t4 fp16 matmul_glu m=3,n=256,k=1536,ext=1,u_ld=8960
h200 bf16 matmul_seam m=1,n=1536,k=2048,mode=0
t4 fp16 matmul_seam m=2,n=2560,k=256,mode=1
h200 bf16 w4a16_seam m=1,n=1536,k=2048,group=128,zp=1,mode=2
h200 bf16 matmul_pro m=1,n=12288,k=1536,mode=0,glu=1
t4 fp16 matmul_pro m=1,n=256,k=1536,mode=2,glu=2,u_ld=8960
h200 bf16 matmul_pro m=1,n=16384,k=5376,mode=1
h200 bf16 w4a16_pro m=1,n=6144,k=1536,group=64,zp=1,mode=0
t4 fp16 w4a16_pro m=1,n=2048,k=2560,group=128,mode=1
h200 bf16 w4a16_glu m=1,n=12288,k=1536,group=128
t4 fp16 w4a16_pro m=1,n=6144,k=1536,group=128,mode=0,glu=1
t4 fp16 w4a16_glu m=3,n=200,k=352,group=32,zp=1
t4 fp16 matmul m=512,n=2048,k=1536
h200 bf16 w4a16_matmul m=1,n=2048,k=1536,group=128
h200 bf16 w4a16_matmul m=16,n=2048,k=1536,group=64,zp=1
t4 fp16 w4a16_matmul m=16,n=2048,k=1536,group=128
h200 fp16 w4a16_matmul m=300,n=1000,k=1536,group=64,zp=1
h200 fp16 w4a16_matmul m=64,n=1000,k=1536,group=64,zp=1
h200 bf16 attention_decode kv_len=4096,head_dim=512,heads=8,kv_heads=1,window=0,batch=1
h200 bf16 attention_decode kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1,prep=1
h200 bf16 attention_decode kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1
t4 fp16 attention_decode kv_len=4096,head_dim=512,heads=8,kv_heads=1,window=0,batch=1,prep=1
t4 fp16 attention_decode kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1
h200 bf16 attention_prefill q_len=512,kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512
h200 fp16 attention_prefill q_len=512,kv_len=512,head_dim=512,heads=8,kv_heads=1,window=0
t4 fp16 attention_prefill q_len=512,kv_len=512,head_dim=512,heads=8,kv_heads=1,window=0
a10g bf16 attention_decode kv_len=4096,head_dim=512,heads=8,kv_heads=1,window=0,batch=1
a10g bf16 attention_decode kv_len=512,head_dim=256,heads=8,kv_heads=1,window=512,batch=1
a10g bf16 attention_prefill q_len=512,kv_len=512,head_dim=512,heads=8,kv_heads=1,window=0
h200 bf16 residual_norm rows=1,cols=1536,mode=0
h200 bf16 qk_norm_rope tokens=1,heads=8,head_dim=512,weight=1,rope=2,inplace=0
t4 fp16 gelu_gate rows=1,inter=6144
t4 fp16 gather_cols rows=512,cols=1536
h200 bf16 gather_cols rows=1,cols=21504
h200 bf16 embed tokens=1,cols=1536,vocab=262144,scale_dim=1536,out_f32=1
h200 bf16 gemma4_ple tokens=1,layers=35,dim=256,hidden=1536
t4 fp16 gemma4_kv_store tokens=1,kv_heads=1,head_dim=256,slots=512,lin=0
h200 bf16 gemma4_kv_store tokens=1,kv_heads=1,head_dim=512,slots=4096,q_heads=8
h200 bf16 gemma4_kv_gather rows=512,kv_heads=1,head_dim=256,slots=512,first=0
h200 bf16 gemma4_fill words=1048576,mode=1
h200 bf16 softcap_argmax rows=1,vocab=262144
h200 bf16 topk rows=1,n=262144,k=64
t4 fp16 topk rows=1,n=262144,k=64
h200 bf16 topk rows=1,n=262144,k=128
t4 fp16 topk rows=3,n=262144,k=128
t4 fp16 rmsnorm rows=1,cols=1536
LIST

check "the cluster merge (CLUSTER=1) compiles for sm_90 with no spills" \
  grep -qE "^  attention_decode .*CLUSTER=1 .*regs, spills 0/0 B" "$tmp/ring"

check "attention_prefill_tall (32-row warps) survivors compile with no spills" \
  grep -qE "^  attention_prefill_tall .*regs, spills 0/0 B" "$tmp/prefill_h200"
check "attention_prefill_wg (warpgroup MMAs) survivors compile for sm_90a at head_dim 256 and 512, every one with no spills" \
  bash -c "grep -qE '^  attention_prefill_wg .*214,016 B smem .*regs' '$tmp/prefill_h200' &&
           ! grep -E '^  attention_prefill_wg .*regs' '$tmp/prefill_h200' | grep -vq 'spills 0/0 B'"
# the warpgroup decode (transposed scores) compiles for sm_90a at both head dims,
# with no spills and its wgmmas not serialized
for s in kv_len=32768,head_dim=512,heads=8,kv_heads=1,window=0,batch=1 \
         kv_len=8192,head_dim=256,heads=8,kv_heads=2,window=0,batch=3; do
  "$T" plan --device h200 --op attention_decode --shape "$s" --compile >>"$tmp/decode_wg" 2>&1
done
check "attention_decode_wg survivors compile with no spills, unserialized" \
  bash -c "grep -qE '^  attention_decode_wg .*regs, spills 0/0 B' '$tmp/decode_wg' &&
           ! grep -E '^  attention_decode_wg ' '$tmp/decode_wg' | grep -vq 'spills 0/0 B' &&
           ! grep -E '^  attention_decode_wg ' '$tmp/decode_wg' | grep -q serialized"
# the warpgroup-MMA prefill GEMM compiles for sm_90a (the "wgmma" feature), and only there
check "w4a16_wgmma survivors compile for sm_90a, every one with no spills" \
  bash -c "grep -E '^  w4a16_wgmma .*regs' '$tmp/w4h200' | grep -q . &&
           ! grep -E '^  w4a16_wgmma .*regs' '$tmp/w4h200' | grep -vq 'spills 0/0 B'"
check "no w4a16_wgmma or w4a16_wgmma_ws survivor has its wgmmas serialized by ptxas (C7511, C7515, ...)" \
  bash -c "! grep -E '^  w4a16_wgmma(_ws)? ' '$tmp/w4h200' | grep -q 'wgmma serialized'"
check "attention_prefill_wg (P·V retired per tile, RETIRE=1) compiles unserialized" \
  bash -c "grep -qE '^  attention_prefill_wg .*RETIRE=1 .*regs, spills 0/0 B' '$tmp/prefill_h200' &&
           ! grep -E '^  attention_prefill_wg ' '$tmp/prefill_h200' | grep -q 'serialized'"
check "w4a16_wgmma survivors with the in-flight k loop (INFLIGHT=1) compile" \
  grep -qE "^  w4a16_wgmma .*INFLIGHT=1 .*regs, spills 0/0 B" "$tmp/w4h200"
# its decode tiles (w4a16_wgmma_dec, experimental: m64n16k16, split k) at m = 16 with zero points
check "w4a16_wgmma_dec survivors (BM=16, split k) compile for sm_90a with no spills, unserialized" \
  bash -c "grep -qE '^  w4a16_wgmma_dec +BK=64 BM=16 .*SPLITK=8 .*regs, spills 0/0 B' '$tmp/w4h200' &&
           ! grep -E '^  w4a16_wgmma_dec ' '$tmp/w4h200' | grep -q serialized"
# the report's occupancy: at m = 16, k = 1536 the staged int4 GEMV (53,760 B a block) holds one
# block an SM under the 25 % carveout, the L1 one several (3-4: its registers bind)
check "the staged m = 16 int4 GEMV: 1 block an SM at the 25 % carveout" \
  grep -qE "^  w4a16_gemv_t .*ASMEM=1 CSPLIT=0 MT=2 .*SPLITK=1 .* 53,760 B smem .*, 1 block/SM \(shared memory at 25 %\)" "$tmp/w4h200"
check "the L1 m = 16 int4 GEMV: several blocks an SM, held by its registers" \
  grep -qE "^  w4a16_gemv_t .*ASMEM=0 CSPLIT=0 MT=2 RT=1 SPLITK=1 .*, [2-9] blocks/SM \(registers\)" "$tmp/w4h200"
# the occupancy column reads TAILOR_CARVEOUT: a malformed value is refused, naming it
check "plan --compile refuses a malformed TAILOR_CARVEOUT" \
  bash -c "! TAILOR_CARVEOUT=half '$T' plan --device h100 --op rmsnorm --shape rows=1,cols=256 --compile --quiet 2>'$tmp/cv' &&
           grep -qF \"TAILOR_CARVEOUT='half'\" '$tmp/cv'"

# the warpgroup GEMM's register budget refuses with its arithmetic (zero points take more)
"$T" plan --device h200 --op w4a16_matmul --shape m=2048,n=6144,k=1536,group=128 >"$tmp/out" 2>&1
check "three warpgroups of BM=256 are refused, with the register arithmetic" \
  grep -qF "w4a16_matmul/w4a16_wgmma BK=64 BM=256 INFLIGHT=0 STAGES=3 WG=3 bf16: 384 threads x ~192 registers (BM=256) > 65536" "$tmp/out"
check "from m=512 on sm_90, w4a16_mma is left to the warpgroup GEMM, saying why" \
  grep -qF "w4a16_matmul/w4a16_mma BK=32 BM=16 BN=64 SPLITK=1 STAGES=2 WM=1 WN=1 bf16: m=2048 on sm_90: left to w4a16_wgmma, which beat every w4a16_mma configuration by 25-40 % from m = 512" "$tmp/out"
"$T" plan --device h200 --op w4a16_matmul --shape m=64,n=2048,k=1536,group=128 >"$tmp/out2" 2>&1
check "... and plain w4a16_wgmma keeps m=64, where the warp-specialized one (BM >= 128) plans nothing" \
  bash -c "grep -qE '^  w4a16_wgmma +BK=[0-9]+ BM=64 ' '$tmp/out2' && ! grep -qE '^  w4a16_wgmma_ws ' '$tmp/out2'"
"$T" plan --device h200 --op w4a16_matmul --shape m=1,n=6144,k=1536,group=128 >"$tmp/out2" 2>&1
check "at decode widths on sm_90, w4a16_mma is left to the GEMVs, saying why" \
  bash -c "grep -qF 'w4a16_matmul/w4a16_mma BK=32 BM=16 BN=64 SPLITK=1 STAGES=2 WM=1 WN=1 bf16: m=1 on sm_90: left to the GEMVs, which beat every w4a16_mma configuration by 49 % or more at decode widths' '$tmp/out2' &&
           grep -qE '^  w4a16_gemv_t ' '$tmp/out2' && ! grep -qE '^  w4a16_mma ' '$tmp/out2'"
"$T" plan --device h200 --op w4a16_matmul --shape m=24,n=6144,k=1536,group=128 >"$tmp/out2" 2>&1
check "... but keeps m=24, between the GEMVs (m <= 16) and the warpgroup GEMM (m >= 64)" \
  grep -qE "^  w4a16_mma " "$tmp/out2"
"$T" plan --device t4 --op w4a16_matmul --dtype fp16 --shape m=1,n=6144,k=1536,group=128 >"$tmp/out2" 2>&1
check "... and on other cards (the T4 plans w4a16_mma at m=1)" grep -qE "^  w4a16_mma " "$tmp/out2"
"$T" plan --device h200 --op w4a16_matmul --shape m=512,n=100,k=1536,group=128 >"$tmp/out2" 2>&1
check "... but not where the warpgroup GEMM plans nothing (n=100: its epilogue needs n % 8 == 0)" \
  bash -c "grep -qE '^  w4a16_mma ' '$tmp/out2' && ! grep -qE '^  w4a16_wgmma ' '$tmp/out2'"
"$T" plan --device t4 --op w4a16_matmul --dtype fp16 --shape m=2048,n=6144,k=1536,group=128 \
  >"$tmp/out2" 2>&1
check "... nor on other cards (the T4 plans w4a16_mma at m=2048)" grep -qE "^  w4a16_mma " "$tmp/out2"
check "three warpgroups of BM=192 pass the register rule without zero points (then left to w4a16_wgmma_ws)" \
  grep -qF "w4a16_matmul/w4a16_wgmma BK=128 BM=192 INFLIGHT=0 STAGES=3 WG=3 bf16: m=2048: left to w4a16_wgmma_ws, which beat every w4a16_wgmma configuration by 2-38 %" "$tmp/out"
check "w4a16_wgmma_ws plans m=2048 on sm_90 (BM=192 among its tiles)" \
  grep -qE "^  w4a16_wgmma_ws +BK=[0-9]+ BM=192 " "$tmp/out"
"$T" plan --device h200 --op w4a16_matmul --shape m=2048,n=6144,k=1536,group=128,zp=1 \
  >"$tmp/out" 2>&1
check "with zero points three warpgroups of BM=192 are refused" \
  grep -qF "w4a16_wgmma BK=128 BM=192 INFLIGHT=0 STAGES=3 WG=3 bf16: 384 threads x ~172 registers (BM=192) > 65536" "$tmp/out"
"$T" plan --device h200 --op attention_prefill \
  --shape q_len=8192,kv_len=8192,head_dim=512,heads=8,kv_heads=1,window=0 >"$tmp/out" 2>&1
check "attention_prefill_wg plans head_dim 512 with two warpgroups a row group" \
  grep -qE "^  attention_prefill_wg +BN=32 HP=8 NWG=1 RETIRE=1 STAGES=2 +214,016 B smem +256 threads" "$tmp/out"
check "attention_prefill_wg refuses four warpgroups at head_dim 512, with the register arithmetic" \
  grep -qF "attention_prefill/attention_prefill_wg BN=32 HP=1 NWG=2 RETIRE=1 STAGES=2 bf16: 4 warpgroups (NWG=2 x head_dim 512 / 256) x 128 threads x ~200 registers > 65536" "$tmp/out"

# a template marked experimental (here a one-configuration space over w4a16_wgmma.cu) is out
# unless asked for
mkdir -p "$tmp/exp"
cat >"$tmp/exp/w4a16_wgmma_test.lua" <<'LUA'
return tailor.w4g_space({ BM = { 64 }, BK = { 64 }, WG = { 1 }, STAGES = { 3 }, INFLIGHT = { 0 } },
                        { experimental = "a test copy, not verified" })
LUA
TAILOR_EXPERIMENTAL=0 TAILOR_TEMPLATE_PATH="$tmp/exp" "$T" plan --device h200 --op w4a16_matmul \
  --shape m=2048,n=6144,k=1536,group=128 >"$tmp/out" 2>&1
check "without TAILOR_EXPERIMENTAL an experimental template is refused, saying why" \
  grep -qE "\[refused-experimental\] w4a16_matmul/w4a16_wgmma_test .*template w4a16_wgmma_test is experimental \(a test copy, not verified\)" "$tmp/out"
TAILOR_EXPERIMENTAL=1 TAILOR_TEMPLATE_PATH="$tmp/exp" "$T" plan --device h200 --op w4a16_matmul \
  --shape m=2048,n=6144,k=1536,group=128 >"$tmp/out" 2>&1
check "with TAILOR_EXPERIMENTAL=1 it is planned" grep -qE "^  w4a16_wgmma_test " "$tmp/out"

# JSON carries the report
"$T" plan --device h200 --op residual_norm --shape rows=1,cols=1536,mode=0 --compile --json \
  >"$tmp/json" 2>/dev/null
check "--json has registers per survivor" grep -q '"regs"' "$tmp/json"

# a template that does not compile: named, exit 1
mkdir -p "$tmp/tpl"
sed 's/source = "rmsnorm.cu"/source = "rmsnorm_broken.cu"/; s/^return {/return {/' \
  "${TAILOR_SOURCE_DIR:?}/templates/rmsnorm.lua" >"$tmp/tpl/rmsnorm_broken.lua"
sed 's/tailor_grid_begin();/tailor_grid_begin(); this_is_not_cuda;/' \
  "$TAILOR_SOURCE_DIR/templates/rmsnorm.cu" >"$tmp/tpl/rmsnorm_broken.cu"
TAILOR_TEMPLATE_PATH="$tmp/tpl" "$T" plan --device h200 --op rmsnorm --shape rows=1,cols=1536 \
  --compile --quiet >"$tmp/out" 2>"$tmp/err"; rc=$?
check "a broken template exits 1 (rc=$rc)" test $rc -eq 1
check "a broken template's survivors say COMPILE ERROR" grep -q "rmsnorm_broken .*COMPILE ERROR" "$tmp/out"
check "the compiler's complaint is shown" grep -q "this_is_not_cuda" "$tmp/out"
check "the summary names the op and the arch" grep -q "rmsnorm failed to compile for sm_90" "$tmp/err"
check "the unbroken template still compiles" grep -q "^  rmsnorm  .*regs, spills" "$tmp/out"

# --dump: one cubin per survivor, named by kernel; the same again is the same bytes; a missing
# directory is a usage error (exit 2) before anything compiles
mkdir -p "$tmp/d1" "$tmp/d2"
"$T" plan --device h200 --op rmsnorm --shape rows=1,cols=1536 --dump "$tmp/d1" --quiet >"$tmp/out" 2>&1
"$T" plan --device h200 --op rmsnorm --shape rows=1,cols=1536 --dump "$tmp/d2" --quiet >/dev/null 2>&1
n=$(grep -c "regs, spills" "$tmp/out")
check "--dump writes one cubin per survivor ($n)" test "$n" -gt 0 -a "$(ls "$tmp/d1" | wc -l)" -eq "$n"
named=$(ls "$tmp/d1" | grep -m1 '^rmsnorm__rmsnorm__sm90__bf16__.*\.cubin$')
check "--dump names the files by kernel ($named)" test -n "$named" -a -s "$tmp/d1/$named"
check "two dumps of the same templates are identical" diff -rq "$tmp/d1" "$tmp/d2"
# --ptx: the PTX of each survivor beside its cubin, for compute_90, naming its kernel's entry
mkdir -p "$tmp/p1"
"$T" plan --device h200 --op rmsnorm --shape rows=1,cols=1536 --dump "$tmp/p1" --ptx --quiet >/dev/null 2>&1
np=$(ls "$tmp/p1" | grep -c '\.ptx$'); nc=$(ls "$tmp/p1" | grep -c '\.cubin$')
check "--ptx writes a PTX beside each cubin ($np, $nc)" test "$np" -gt 0 -a "$np" -eq "$nc"
check "--ptx's file holds its kernel's entry for sm_90" grep -q "\.entry ${named%.cubin}(" "$tmp/p1/${named%.cubin}.ptx"
"$T" plan --device h200 --op rmsnorm --shape rows=1,cols=1536 --ptx >/dev/null 2>"$tmp/err"; rc=$?
check "--ptx without --dump exits 2 saying why" test $rc -eq 2 -a -n "$(grep "give --dump DIR" "$tmp/err")"
"$T" plan --device h200 --op rmsnorm --shape rows=1,cols=1536 --dump "$tmp/none" >/dev/null 2>"$tmp/err"; rc=$?
check "--dump into a missing directory exits 2 (rc=$rc)" test $rc -eq 2
check "--dump names the missing directory" grep -q "not an existing directory" "$tmp/err"

# the seams' weights staged with cp.async from sm_80 (spacelib's seam_async: matmul_gemv.cu
# PRO_STAGE, residual_norm.cu RN_ASYNC): on the H200 every survivor compiles with the space's
# exact shared memory, which counts matmul_pro's staged weights; the T4 (no cp.async) keeps
# survivors, built without it and with matmul_pro's shared memory smaller by the staging
for op_shape in "matmul_pro m=1,n=2560,k=1536,mode=1,glu=0" "residual_norm rows=1,cols=1536,mode=0"; do
  op=${op_shape% *} shape=${op_shape#* }
  "$T" plan --device h200 --op "$op" --shape "$shape" --compile --quiet >"$tmp/out" 2>&1; rc=$?
  n=$(grep -c "regs, spills" "$tmp/out")
  check "$op compiles on h200 (rc=$rc)" test $rc -eq 0
  check "$op: every survivor has the space's shared memory ($n compiled)" \
    test "$n" -gt 0 -a "$n" -eq "$(grep -c '^  [a-z]' "$tmp/out")"
  "$T" plan --device h200 --op "$op" --shape "$shape" --json >"$tmp/json" 2>&1
  check "$op on h200 is built with the cp.async staging" grep -Eq "_(PRO_STAGE|RN_ASYNC)1_" "$tmp/json"
  smem=$(grep -m1 "regs, spills" "$tmp/out" | sed 's/.* \([0-9,]*\) B smem.*/\1/' | tr -d ,)
  check "$op holds the staged weights ($smem B > 4 x 1536)" test "${smem:-0}" -gt 6144
  "$T" plan --device t4 --dtype fp16 --op "$op" --shape "$shape" --json >"$tmp/json" 2>&1
  check "$op on the T4 keeps survivors, none staged with cp.async" \
    test "$(grep -c '"kernel"' "$tmp/json")" -gt 0 -a "$(grep -Ec '_(PRO_STAGE|RN_ASYNC)1_' "$tmp/json")" -eq 0
done

# the early-trigger probe variant (scripts/probe/pdl_variants.sh, run on the GPU by gpu-check.sh
# pdl): its files compile on the H200 with the committed spaces, and its machine code is not the
# committed one (the trigger is really in it)
bash "$TAILOR_SOURCE_DIR/scripts/probe/pdl_variants.sh" write "$tmp/pdl" attn >/dev/null; rc=$?
check "pdl_variants writes the attn variant (rc=$rc)" test $rc -eq 0 -a -f "$tmp/pdl/attention_decode.cu"
mkdir -p "$tmp/pdl_new" "$tmp/pdl_old"
for op_shape in "rmsnorm rows=1,cols=1536" "gemma4_kv_store tokens=1,kv_heads=1,head_dim=256,slots=512,q_heads=8"; do
  op=${op_shape% *} shape=${op_shape#* }
  TAILOR_TEMPLATE_PATH="$tmp/pdl" "$T" plan --device h200 --op "$op" --shape "$shape" \
    --dump "$tmp/pdl_new" --quiet >"$tmp/out" 2>&1; rc=$?
  check "pdl variant $op compiles on h200 (rc=$rc)" test $rc -eq 0 -a "$(grep -c 'regs, spills' "$tmp/out")" -gt 0
  "$T" plan --device h200 --op "$op" --shape "$shape" --dump "$tmp/pdl_old" --quiet >/dev/null 2>&1
done
check "the pdl variant's cubins differ from the committed ones" \
  test -n "$(diff -rq "$tmp/pdl_old" "$tmp/pdl_new" | grep differ)"

[[ $fail -eq 0 ]] && echo "cli_plan_compile: all checks passed"
exit $fail
