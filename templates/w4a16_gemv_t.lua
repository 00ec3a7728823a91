-- w4a16_gemv_t.lua — search space of templates/w4a16_gemv_t.cu (op "w4a16_matmul"; shape keys
-- m, n, k, group, zp, s_ld). Tensor-core decode for m <= 16 in the transposed form: the weights
-- are the mma's A operand (16 rows x k16, 8 weights per lane per mma), unscaled when a quad of
-- 128 columns lies in one group; WR x WK warps per block (rows x k, k reduced in shared
-- memory), RT row tiles of 16 per warp, UNROLL quads per batch of loads, SPLITK blocks per
-- column tile where the tiles alone cannot keep enough warps loading, ASMEM the block's
-- activations staged in shared memory (1) or read from L1 one quad ahead (0), TRIM a warp's last,
-- partial batch computed for its quads only, CSPLIT the split blocks summed in a cluster.

-- The rules are spacelib's (tailor.w4t_space), shared with w4a16_glu_t.lua.

return tailor.w4t_space({
  WR = { 1, 2, 4 },
  WK = { 1, 2, 4 },
  RT = { 1, 2 },
  UNROLL = { 1, 2, 3 },
  SPLITK = tailor.W4T_SPLITS,
  MT = { 1, 2 },
  ASMEM = { 0, 1 },
  TRIM = { 0, 1 },
  -- 1: a column tile's SPLITK blocks sum their shares in a thread block cluster (sm_90)
  CSPLIT = function(shape, dtype, device) return device.sm >= 90 and { 0, 1 } or { 0 } end,
}, false)
