-- w4a16_gemv_t_fold.lua — search space of templates/w4a16_gemv_t.cu with FOLD (op
-- "w4a16_matmul"): the transposed tensor-core GEMV whose weight pairs enter the mma as MAGIC + u,
-- the bias (MAGIC + z) taken off each quad's fp32 sum with the quad's activation sums, which
-- each block computes once from its staged activations (ASMEM = 1). 32 fewer instructions a
-- quad and row tile than the per-pair subtraction; written for the int4 LM head, whose time
-- over its loads is its math (docs/perf/w4a16.md session 49). The rules are spacelib's
-- (tailor.w4t_space).

return tailor.w4t_space({
  WR = { 1, 2, 4 },
  WK = { 1, 2, 4 },
  RT = { 1, 2 },
  UNROLL = { 2, 3 },
  SPLITK = tailor.W4T_SPLITS,
  MT = { 1, 2 },
  ASMEM = { 1 },
  TRIM = { 0, 1 },
  CSPLIT = function(shape, dtype, device) return device.sm >= 90 and { 0, 1 } or { 0 } end,
  FOLD = { 1 },
}, false, {
  experimental = "written in session 49 after the device time was spent: compiled, not yet "
    .. "run on a GPU",
})
