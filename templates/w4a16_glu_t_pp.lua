-- w4a16_glu_t_pp.lua — search space of templates/w4a16_gemv_t.cu with GLU and PP (op
-- "w4a16_glu"): w4a16_glu_t.lua's gated GEMV with its batch loop unrolled by two
-- (w4a16_gemv_t_pp.lua says why). The rules are spacelib's.

return tailor.w4t_space(tailor.w4t_glu_params({ PP = { 1 }, TRIM = { 0 } }), true, {
  experimental = "written in session 51: compiled, not yet run on a GPU",
})
