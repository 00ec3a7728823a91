-- w4a16_gemv_t_swz.lua — templates/w4a16_gemv_t.cu with ASMEM = 2 (op "w4a16_matmul"): the
-- block's activations staged in shared memory as with ASMEM = 1, each row's 16-byte pieces
-- swizzled and rows padded by 32 bytes, so that the lanes' 128-bit reads of their B fragments
-- have no bank conflict (ASMEM = 1 takes two wavefronts a phase: w4t::swz in the template,
-- docs/perf/w4a16.md session 32). The rules are spacelib's (tailor.w4t_*), as for
-- w4a16_gemv_t.lua, whose other parameters it keeps.

return {
  op = "w4a16_matmul",
  source = "w4a16_gemv_t.cu",
  dtypes = { "fp16", "bf16" },
  experimental = "new (session 32): the swizzled activation rows are unverified on a GPU",

  params = {
    WR = { 1, 2, 4 },
    WK = { 1, 2, 4 },
    RT = { 1, 2 },
    UNROLL = { 1, 2, 3 },
    SPLITK = tailor.W4T_SPLITS,
    MT = { 1, 2 },
    ASMEM = { 2 },
  },

  defines = function(p, shape, dtype, device) return tailor.w4t_defines(shape, false) end,
  valid = function(p, shape, dtype, device, purpose)
    return tailor.w4t_valid(p, shape, device, purpose, false)
  end,
  requires = function(p, shape, dtype, device) return tailor.w4t_requires(dtype, device) end,
  threads = function(p, shape, dtype, device) return p.WR * p.WK * 32 end,
  smem_static = function(p, shape, dtype, device) return tailor.w4t_smem_static(p) end,
  -- T sA[m][128 qps + 16]
  smem_dynamic = function(p, shape, dtype, device) return tailor.w4t_asmem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device) return tailor.w4t_grid(p, shape, false) end,
  workspace = function(p, shape, dtype, device)
    return tailor.splitk_workspace(p, shape, tailor.ceil_div(shape.n, tailor.w4t_block_rows(p)))
  end,
  args = function(p, shape, dtype, device) return tailor.w4a16_args(p, shape) end,
}
