-- w4a16_glu_t_minb.lua — search space of templates/w4a16_gemv_t.cu with GLU and MINB (op
-- "w4a16_glu"): w4a16_glu_t.lua's gated GEMV under __launch_bounds__(threads, 1)
-- (w4a16_gemv_t_minb.lua says why). The rules are spacelib's.

return tailor.w4t_space(tailor.w4t_glu_params({ MINB = { 1 } }), true, {
  experimental = "written in session 51: the launch bounds alone, against MAGREG",
})
