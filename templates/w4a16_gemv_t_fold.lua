-- w4a16_gemv_t_fold.lua — search space of templates/w4a16_gemv_t.cu with FOLD (op
-- "w4a16_matmul"): the transposed tensor-core GEMV whose weight pairs enter the mma as MAGIC + u,
-- the bias (MAGIC + z) taken off each quad's fp32 sum with the quad's activation sums, which
-- each block computes once from its staged activations (ASMEM = 1). 32 fewer instructions a
-- quad and row tile than the per-pair subtraction; written for the int4 LM head, whose time
-- over its loads is its math (docs/perf/w4a16.md session 49). The rules are spacelib's
-- (tailor.w4t_space).

return tailor.w4t_space(tailor.w4t_params({
  UNROLL = { 2, 3 },
  ASMEM = { 1 },
  FOLD = { 1 },
  MAGREG = { 0, 1 },
}), false, {
  experimental = "checked right on an H200 (session 50), 18-57 % slower than the register "
    .. "path (the quad sums then ran for all 8 MT rows; now for rows below m, with MAGREG)",
})
