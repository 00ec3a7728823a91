-- w4a16_gemv_t.lua — search space of templates/w4a16_gemv_t.cu (op "w4a16_matmul"; shape keys
-- m, n, k, group, zp, s_ld). Tensor-core decode for m <= 16 in the transposed form: the weights
-- are the mma's A operand (16 rows x k16, 8 weights per lane per mma), unscaled when a quad of
-- 128 columns lies in one group; WR x WK warps per block (rows x k, k reduced in shared
-- memory), RT row tiles of 16 per warp, UNROLL quads per batch of loads, SPLITK blocks per
-- column tile where the tiles alone cannot keep enough warps loading, ASMEM the block's
-- activations staged in shared memory (1) or read from L1 one quad ahead (0).

-- The rules are spacelib's (tailor.w4t_*), shared with w4a16_glu_t.lua.

return {
  op = "w4a16_matmul",
  source = "w4a16_gemv_t.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    WR = { 1, 2, 4 },
    WK = { 1, 2, 4 },
    RT = { 1, 2 },
    UNROLL = { 1, 2, 3 },
    SPLITK = tailor.W4T_SPLITS,
    MT = { 1, 2 },
    ASMEM = { 0, 1 },
    PERSIST = tailor.W4T_PERSIST,
  },

  defines = function(p, shape, dtype, device) return tailor.w4t_defines(shape, false) end,

  valid = function(p, shape, dtype, device, purpose)
    return tailor.w4t_valid(p, shape, device, purpose, false)
  end,

  requires = function(p, shape, dtype, device) return tailor.w4t_requires(dtype, device) end,

  threads = function(p, shape, dtype, device) return p.WR * p.WK * 32 end,
  -- __shared__ float red[WK * MT * 8 * BN]: the k warps' sums (and the split-k flag)
  smem_static = function(p, shape, dtype, device) return tailor.w4t_smem_static(p) end,
  -- ASMEM = 1: T sA[m][128 qps + 16] (pieces swizzled)
  smem_dynamic = function(p, shape, dtype, device) return tailor.w4t_asmem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device) return tailor.w4t_grid(p, shape, false, device) end,

  -- fp32 partials [SPLITK, m, n] and one counter per column tile, left reusable by the kernel
  workspace = function(p, shape, dtype, device)
    return tailor.splitk_workspace(p, shape, tailor.ceil_div(shape.n, tailor.w4t_block_rows(p)))
  end,

  args = function(p, shape, dtype, device) return tailor.w4a16_args(p, shape) end,
}
