-- w4a16_glu_t_clamp.lua — search space of templates/w4a16_gemv_t.cu with GLU and CLAMP (op
-- "w4a16_glu"): w4a16_glu_t.lua's gated GEMV with CLAMP (w4a16_gemv_t_clamp.lua says what).

return tailor.w4t_space(tailor.w4t_glu_params({ CLAMP = { 1 } }), true, {
  magreg = true,
  experimental = "session 52: w4a16_gemv_t_clamp.lua's loads in the gated GEMV; not yet timed on "
    .. "a GPU",
})
