#!/usr/bin/env bash
# seam_stage.sh — on the development machine: a directory of template overrides that stage the
# layer seams' norm weights with cp.async before the grid wait, kept out of the default space
# until measured:
#   matmul_pro.lua     templates/matmul_pro.lua built with PRO_STAGE=1 (matmul_gemv.cu: the seam
#                      prologue's weights into shared memory; they were read from DRAM after its
#                      reductions), its shared memory counted, sm_80+ only;
#   residual_norm.lua  templates/residual_norm.lua built with RN_ASYNC=1 (the weights it already
#                      stages before the wait, requested with cp.async instead of plain loads that
#                      hold the threads before the wait), THREADS > 32, sm_80+ only.
#   bash scripts/probe/seam_stage.sh [DIR]   (default probe-variants/staged/templates)
# On the GPU machine (probe-variants carried) `gpu-check.sh seam-stage` verifies every staged
# survivor and times the E2B decode with and without them (scripts/probe/ab_model.sh with
# AB_NEW_PATH=DIR: only these ops are tuned again). tests/cli_plan_compile.sh compiles both from
# a temporary DIR so that they cannot rot.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
dst=${1:-probe-variants/staged/templates}
rm -rf "$dst"
mkdir -p "$dst"
python3 - "$here/templates" "$dst" <<'PY'
import sys
src, dst = sys.argv[1], sys.argv[2]

def variant(name, edits, tag):
    text = open("%s/%s" % (src, name)).read()
    for old, new in edits:
        if old not in text:
            sys.exit("seam_stage.sh: templates/%s no longer holds: %s" % (name, old.strip()))
        text = text.replace(old, new, 1)
    open("%s/%s" % (dst, name), "w").write("-- probe variant (scripts/probe/seam_stage.sh): %s\n" % tag + text)

cp_async = ("  requires = function(p, shape, dtype, device)\n"
            "    local r = tailor.dtype_requires(dtype)\n"
            "    r[#r + 1] = \"cp.async\"\n"
            "    return r\n"
            "  end,\n")
variant("matmul_pro.lua", [
    ("    d.GLU = shape.glu\n", "    d.GLU = shape.glu\n    d.PRO_STAGE = 1\n"),
    ("    return tailor.gemv_smem_static(p, nr, false) + tailor.pro_smem(p, shape.k)\n",
     "    return tailor.gemv_smem_static(p, nr, false) + tailor.pro_smem(p, shape.k) + 4 * shape.k + 16\n"),
    ("  requires = function(p, shape, dtype, device) return tailor.dtype_requires(dtype) end,\n", cp_async),
], "PRO_STAGE=1")
variant("residual_norm.lua", [
    ("    return { COLS = shape.cols, MODE = shape.mode }\n",
     "    return { COLS = shape.cols, MODE = shape.mode, RN_ASYNC = 1 }\n"),
    ("  valid = function(p, shape, dtype, device)\n",
     "  valid = function(p, shape, dtype, device)\n"
     "    if p.THREADS <= 32 then return false, \"RN_ASYNC: the staged weights need a barrier (THREADS > 32)\" end\n"
     "    if shape.cols % 8 ~= 0 then return false, \"RN_ASYNC: cols not a multiple of 8 (16-byte copies)\" end\n"),
    ("  requires = function(p, shape, dtype, device)\n    if dtype == \"bf16\" then return { \"bf16\" } end\n    return {}\n  end,\n",
     cp_async),
], "RN_ASYNC=1")
PY
echo "$dst: matmul_pro.lua (PRO_STAGE=1), residual_norm.lua (RN_ASYNC=1)"
