-- w4a16_wgmma_inflight.lua — templates/w4a16_wgmma.cu with one k tile's MMAs left in flight
-- while the next is dequantized (INFLIGHT = 1: k_loop_inflight, the fragments in two register
-- sets, prefetch distance STAGES - 2), instead of draining them at the end of every tile. Op
-- "w4a16_matmul"; the rules, budget and launch are tailor.w4g_space's.

return tailor.w4g_space({
  BM = { 64, 128, 192, 256 },
  BK = { 64, 128 },
  WG = { 1, 2, 3 },
  STAGES = { 3, 4, 5 },
  INFLIGHT = { 1 },
}, { experimental = "written without a GPU: the in-flight tile pipeline is unverified" })
