-- w4a16_glu_t_fold.lua — search space of templates/w4a16_gemv_t.cu with GLU and FOLD (op
-- "w4a16_glu"): w4a16_glu_t.lua's gated gate|up GEMV whose weight pairs enter the mma as
-- MAGIC + u, the bias taken off each quad's fp32 sum with the staged activations' quad sums
-- (w4a16_gemv_t_fold.lua says why; w4a16_gemv_t.cu FOLD says how). The rules are spacelib's
-- (tailor.w4t_space).

return tailor.w4t_space(tailor.w4t_glu_params({ ASMEM = { 1 }, FOLD = { 1 } }), true, {
  experimental = "checked right on an H200 (session 50), 35-57 % slower than w4a16_glu_t "
    .. "at the E2B gated shapes (the quad sums then ran for all 8 MT rows)",
})
