#!/usr/bin/env bash
# pro_stage.sh — on the development machine: probe-variants/staged/templates/matmul_pro.lua, a copy
# of templates/matmul_pro.lua built with PRO_STAGE=1 (templates/matmul_gemv.cu: the seam
# prologue's norm weights requested into shared memory with cp.async before the grid wait), its
# shared memory counted, sm_80+ only. On the GPU machine (probe-variants carried):
#   AB_NEW_PATH=probe-variants/staged/templates bash scripts/probe/ab_model.sh        (bf16 E2B)
# times the decode with and without it, matmul_pro alone tuned again; and
#   TAILOR_TEMPLATE_PATH=$PWD/probe-variants/staged/templates build-gpu/tailor tune --op matmul_pro ...
#     --verify-all
# checks every staged survivor against the C reference.
#   bash scripts/probe/pro_stage.sh [DIR]   (default probe-variants/staged/templates; tests/
#   cli_plan_compile.sh compiles the variant from a temporary DIR so that it cannot rot)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
src=$here/templates/matmul_pro.lua
dst=${1:-probe-variants/staged/templates}
rm -rf "$dst"
mkdir -p "$dst"
python3 - "$src" "$dst/matmul_pro.lua" <<'PY'
import sys
text = open(sys.argv[1]).read()
def edit(old, new):
    global text
    if old not in text:
        sys.exit("pro_stage.sh: %s no longer holds: %s" % (sys.argv[1], old))
    text = text.replace(old, new, 1)
edit("    d.GLU = shape.glu\n", "    d.GLU = shape.glu\n    d.PRO_STAGE = 1\n")
edit("    return tailor.gemv_smem_static(p, nr, false) + tailor.pro_smem(p, shape.k)\n",
     "    return tailor.gemv_smem_static(p, nr, false) + tailor.pro_smem(p, shape.k) + 4 * shape.k + 16\n")
edit("  requires = function(p, shape, dtype, device) return tailor.dtype_requires(dtype) end,\n",
     "  requires = function(p, shape, dtype, device)\n"
     "    local r = tailor.dtype_requires(dtype)\n"
     "    r[#r + 1] = \"cp.async\"\n"
     "    return r\n"
     "  end,\n")
open(sys.argv[2], "w").write("-- probe variant (scripts/probe/pro_stage.sh): PRO_STAGE=1\n" + text)
PY
echo "$dst/matmul_pro.lua: matmul_pro with PRO_STAGE=1"
