-- w4a16_wgmma.lua — search space of templates/w4a16_wgmma.cu (op "w4a16_matmul"; shape keys m, n,
-- k, group, zp): the prefill GEMM on sm_90a warpgroup MMAs, weights dequantized into wgmma's
-- register A operand, activations its swizzled shared-memory B operand. BM tokens (the wgmma N),
-- 64 weight rows per warpgroup, BK columns per stage. The space itself is tailor.w4g_space
-- (spacelib.lua); these are the configurations verified on a GPU (session 11), and
-- w4a16_wgmma_v5.lua holds the rest while it is experimental.

return tailor.w4g_space({
  BM = { 64, 128, 256 },
  BK = { 64, 128 },
  WG = { 1, 2 },
  STAGES = { 3, 4, 5 },
  ILV = { 0 },
})
