-- w4a16_wgmma_ws.lua — search space of templates/w4a16_wgmma.cu with WS = 1 (op "w4a16_matmul",
-- prefill shapes): a copy warpgroup issues every cp.async of the ring and the warpgroups that
-- multiply only wait for a stage (mbarriers), dequantize and issue their MMAs, so no block-wide
-- barrier is left in the k loop. Why: ncu of the default kernel at m = 2048 (docs/perf/w4a16.md,
-- session 36) had its warps stalled on the per-tile __syncthreads for 1.94 of every 4.6 cycles
-- between their instructions, and the copies' address arithmetic a third of what they issue.
-- Measured (session 37, H100): m = 2048 n = 6144 k = 1536 78.1 -> 69.0 us, n = 1536 k = 6144
-- 77.0 -> 70.0, m = 512 26.4 -> 22.9 (0.66x / 0.59x / 0.59x cuBLAS -> 0.74x / 0.64x / 0.68x);
-- every survivor verified at five shapes and clean under memcheck and racecheck.
-- The rules are tailor.w4g_space's; the block has a warpgroup more (setmaxnreg gives the
-- multiplying ones 224 registers at WG = 2) and the ring 16 bytes a stage more (its full and
-- empty barriers).

local space = tailor.w4g_space({
  BM = { 128, 192, 256 },
  BK = { 64, 128 },
  WG = { 1, 2 },
  STAGES = { 3, 4, 5 },
  INFLIGHT = { 1 },
  WS = { 1 },
})

local ring_bytes = space.smem_dynamic
space.threads = function(p, shape, dtype, device) return 128 * p.WG + 128 end
space.smem_dynamic = function(p, shape, dtype, device)
  return ring_bytes(p, shape, dtype, device) + 16 * p.STAGES
end
return space
