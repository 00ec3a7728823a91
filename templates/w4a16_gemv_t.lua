-- w4a16_gemv_t.lua — search space of templates/w4a16_gemv_t.cu (op "w4a16_matmul"; shape keys
-- m, n, k, group, zp, s_ld). Tensor-core decode for m <= 16 in the transposed form: the weights
-- are the mma's A operand (16 rows x k16, 8 weights per lane per mma), unscaled when a quad of
-- 128 columns lies in one group; WR x WK warps per block (rows x k, k reduced in shared
-- memory), RT row tiles of 16 per warp, UNROLL quads per batch of loads, SPLITK blocks per
-- column tile where the tiles alone cannot keep enough warps loading, ASMEM the block's
-- activations staged in shared memory (1) or read from L1 one quad ahead (0), TRIM a warp's last,
-- partial batch computed for its quads only, CSPLIT the split blocks summed in a cluster.

-- The parameters (tailor.w4t_params) and rules (tailor.w4t_space) are spacelib's, shared with
-- w4a16_glu_t.lua and the variant spaces w4a16_gemv_t_ring.lua and w4a16_gemv_t_fold.lua.

return tailor.w4t_space(tailor.w4t_params(), false)
