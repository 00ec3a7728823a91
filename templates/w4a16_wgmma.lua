-- w4a16_wgmma.lua — search space of templates/w4a16_wgmma.cu (op "w4a16_matmul"; shape keys m, n,
-- k, group, zp): the prefill GEMM on sm_90a warpgroup MMAs, weights dequantized into wgmma's
-- register A operand, activations its swizzled shared-memory B operand. BM tokens (the wgmma N),
-- 64 weight rows per warpgroup, BK columns per stage. The rules, budget and launch are
-- tailor.w4g_space's (spacelib.lua). INFLIGHT = 1 leaves one k tile's MMAs in flight while the
-- next is dequantized (k_loop_inflight: the fragments in two register sets, prefetch distance
-- STAGES - 2); INFLIGHT = 0 drains them at the end of every tile. Neither wins every shape
-- (docs/perf/w4a16.md, v6). Every configuration here was verified on the H200 (tune
-- --verify-all, sessions 11 and 12) and, after session 36's copies, on the H100.

local space = tailor.w4g_space({
  BM = { 64, 128, 192, 256 },
  BK = { 64, 128 },
  WG = { 1, 2, 3 },
  STAGES = { 3, 4, 5 },
  INFLIGHT = { 0, 1 },
})

-- ptxas (CUDA 13.0) serializes the warpgroup MMAs of BM = 64 BK = 128 with one tile in flight
-- through three stages (C7514: other instructions read the accumulators inside the pipeline
-- stage; every WG without zero points, WG = 3 with them). Such a kernel is right but never
-- the fastest (docs/perf/w4a16.md, session 36), so the space leaves it out (pruning only).
local rules = space.valid
space.valid = function(p, shape, dtype, device, purpose)
  if purpose ~= "launch" and p.BM == 64 and p.BK == 128 and p.STAGES == 3 and p.INFLIGHT == 1 then
    return false, "BM=64 BK=128 STAGES=3 INFLIGHT=1: ptxas serializes its wgmma instructions (C7514)"
  end
  local ok, why = rules(p, shape, dtype, device, purpose)
  if not ok then return false, why end
  -- pruning only: the warp-specialized form of this kernel (w4a16_wgmma_ws.lua) beat its best at
  -- all 36 prefill targets of an H100's and an H200's first boots and issue 4's m = 2048 shapes,
  -- by 2-38 % (docs/perf/w4a16.md, session 48); where it plans the shape, tuning does not time
  -- these (after the rules above, so that a refusal of this kernel's own still says its reason)
  if purpose ~= "launch" and tailor.w4g_ws_covers(shape, dtype, device) then
    return false, string.format("m=%d: left to w4a16_wgmma_ws, which beat every w4a16_wgmma "
                                .. "configuration by 2-38 %%", shape.m)
  end
  return true
end
return space
