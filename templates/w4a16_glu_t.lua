-- w4a16_glu_t.lua — search space of templates/w4a16_gemv_t.cu built as op "w4a16_glu" (decode:
-- a layer's gate|up stack of 2n int4 rows with Gemma 4's gating in the epilogue; shape keys m,
-- n, k, group, zp, s_ld). The tensor-core GEMV of w4a16_gemv_t.lua with GLU defined: each warp's
-- two row tiles are 16 gate rows and their 16 up rows (RT = 2), so a block of WR x WK warps
-- gives WR x 16 outputs; no split-k (the gating needs both whole sums in one block).

return {
  op = "w4a16_glu",
  source = "w4a16_gemv_t.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    WR = { 1, 2, 4 },
    WK = { 1, 2, 4 },
    RT = { 2 },
    UNROLL = { 2 },
    SPLITK = { 1 },
    MT = { 1, 2 },
    ASMEM = { 0, 1 },
    PERSIST = tailor.W4T_PERSIST,
  },

  defines = function(p, shape, dtype, device) return tailor.w4t_defines(shape, true) end,

  valid = function(p, shape, dtype, device, purpose)
    return tailor.w4t_valid(p, shape, device, purpose, true)
  end,

  requires = function(p, shape, dtype, device) return tailor.w4t_requires(dtype, device) end,

  threads = function(p, shape, dtype, device) return p.WR * p.WK * 32 end,
  smem_static = function(p, shape, dtype, device) return tailor.w4t_smem_static(p) end,
  smem_dynamic = function(p, shape, dtype, device) return tailor.w4t_asmem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device) return tailor.w4t_grid(p, shape, true, device) end,

  args = function(p, shape, dtype, device) return tailor.w4a16_glu_args(shape) end,
}
