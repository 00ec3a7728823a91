-- w4a16_glu_t_magreg.lua — search space of templates/w4a16_gemv_t.cu with GLU and MAGREG (op
-- "w4a16_glu"): w4a16_glu_t.lua's gated GEMV with MAGREG (w4a16_gemv_t_magreg.lua says what).
-- The rules are spacelib's.

return tailor.w4t_space(tailor.w4t_glu_params(), true, {
  magreg = true,
  experimental = "session 51: 7.5 % faster than w4a16_glu_t at n = 12288 on an H100, every "
    .. "survivor there checked right; the default once the GPU tests have run on it",
})
