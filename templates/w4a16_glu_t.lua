-- w4a16_glu_t.lua — search space of templates/w4a16_gemv_t.cu built as op "w4a16_glu" (decode:
-- a layer's gate|up stack of 2n int4 rows with Gemma 4's gating in the epilogue; shape keys m,
-- n, k, group, zp, s_ld). The tensor-core GEMV of w4a16_gemv_t.lua with GLU defined: each warp's
-- two row tiles are 16 gate rows and their 16 up rows (RT = 2), so a block of WR x WK warps
-- gives WR x 16 outputs; no split-k (the gating needs both whole sums in one block). The
-- parameters are spacelib's (tailor.w4t_glu_params), shared with the variant spaces
-- w4a16_glu_t_fold.lua, w4a16_glu_t_l2pf.lua and w4a16_glu_t_magreg.lua.

return tailor.w4t_space(tailor.w4t_glu_params(), true)
