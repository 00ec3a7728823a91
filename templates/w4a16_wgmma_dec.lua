-- w4a16_wgmma_dec.lua — search space of templates/w4a16_wgmma.cu for decode shapes (op
-- "w4a16_matmul", m <= 32): the prefill GEMM's warpgroup MMAs with a narrow N (BM = 8, 16 or 32
-- tokens: m64n8k16 .. m64n32k16), the weights dequantized into the register A operand, the
-- activations its swizzled shared-memory B operand, and k split over SPLITK blocks where n alone
-- leaves SMs idle. Written for m = 16, where the GEMV (w4a16_gemv_t) stalls on the per-lane L1
-- reads of its activations (ncu, docs/perf/w4a16.md session 28) while wgmma reads them from
-- shared memory itself, and the cp.async ring keeps weight bytes in flight without registers.
-- The rules, budget and launch are tailor.w4g_space's (spacelib.lua).

return tailor.w4g_space({
  BM = { 8, 16, 32 },
  BK = { 64, 128 },
  WG = { 1, 2 },
  STAGES = { 3, 4, 6 },
  INFLIGHT = { 0, 1 },
  SPLITK = { 1, 2, 4, 8, 16 },
}, {
  decode = true,
  experimental = "verified on an H200 (session 31) but slower than w4a16_gemv_t at m = 16",
})
