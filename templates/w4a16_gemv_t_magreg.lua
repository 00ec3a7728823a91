-- w4a16_gemv_t_magreg.lua — search space of templates/w4a16_gemv_t.cu with MAGREG (op
-- "w4a16_matmul"): w4a16_gemv_t.lua's register path whose pairs take their mask and MAGIC in one
-- LOP3 (MAGIC held in a register ptxas cannot fold), one instruction of four a pair fewer. Written
-- for the int4 LM head, whose time over its loads is its math (docs/perf/w4a16.md session 49).
-- The rules are spacelib's.

return tailor.w4t_space(tailor.w4t_params({ MAGREG = { 1 }, MINB = { 1 } }), false, {
  experimental = "written in session 50: compiled; A/B against MINB alone in session 51",
})
