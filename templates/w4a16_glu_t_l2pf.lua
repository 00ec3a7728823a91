-- w4a16_glu_t_l2pf.lua — search space of templates/w4a16_gemv_t.cu with GLU and L2PF (op
-- "w4a16_glu"): w4a16_glu_t.lua's gated gate|up GEMV whose weight loads ask L2 for the 256-byte
-- segment around them on a miss (w4a16_gemv_t_l2pf.lua says why). The rules are spacelib's.

return tailor.w4t_space(tailor.w4t_glu_params({ L2PF = { 1 } }), true, {
  experimental = "checked right on an H200 (session 50), 4-8 % slower than w4a16_glu_t at the "
    .. "E2B gated shapes",
})
