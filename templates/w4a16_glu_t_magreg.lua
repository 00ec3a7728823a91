-- w4a16_glu_t_magreg.lua — search space of templates/w4a16_gemv_t.cu with GLU and MAGREG (op
-- "w4a16_glu"): w4a16_glu_t.lua's gated gate|up GEMV with a pair's mask and MAGIC in one LOP3
-- (w4a16_gemv_t_magreg.lua says why). The rules are spacelib's.

return tailor.w4t_space(tailor.w4t_glu_params({ MAGREG = { 1 }, MINB = { 1 } }), true, {
  experimental = "written in session 50: compiled; A/B against MINB alone in session 51",
})
