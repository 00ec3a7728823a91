-- w4a16_glu.lua — search space of templates/w4a16_gemv.cu built as op "w4a16_glu" (decode: a
-- layer's gate|up stack of 2n int4 rows with Gemma 4's gating in the epilogue; shape keys m, n,
-- k, group, zp, s_ld). The CUDA-core GEMV of w4a16_gemv.lua with GLU defined: each warp reads
-- its ROWS gate rows and the ROWS matching up rows, so a warp holds 2*ROWS rows of
-- accumulators and loads in flight, and the limits below count both. Replaces a w4a16_matmul
-- of the stack and a gelu_gate launch.

return {
  op = "w4a16_glu",
  source = "w4a16_gemv.cu",
  dtypes = { "fp16", "bf16" },

  params = tailor.W4A16_GEMV_PARAMS,

  defines = function(p, shape, dtype, device)
    return { GROUP = shape.group, HAS_ZP = shape.zp, GLU = 1 }
  end,

  valid = function(p, shape, dtype, device, purpose)
    local ok, why = tailor.w4a16_gemv_valid(p, shape, purpose)
    if not ok then return false, why end
    -- twice the rows of w4a16_gemv: the gate's and the up's accumulators and loads
    if 2 * p.MT * p.ROWS > 8 then
      return false, string.format("MT*ROWS=%d x 2 (gate and up) > 8 accumulator sets",
                                  p.MT * p.ROWS)
    end
    return true
  end,

  requires = function(p, shape, dtype, device) return tailor.dtype_requires(dtype) end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return tailor.gemv_smem_static(p, 2, false) end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return tailor.gemv_grid(p, shape) end,

  args = function(p, shape, dtype, device) return tailor.w4a16_glu_args(shape) end,
}
