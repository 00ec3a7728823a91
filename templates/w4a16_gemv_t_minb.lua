-- w4a16_gemv_t_minb.lua — search space of templates/w4a16_gemv_t.cu with MINB (op
-- "w4a16_matmul"): w4a16_gemv_t.lua's kernels under __launch_bounds__(threads, 1), the register
-- target MAGREG needs, without MAGREG: the A/B that tells the two apart (docs/perf/w4a16.md
-- session 51). The rules are spacelib's.

return tailor.w4t_space(tailor.w4t_params({ MINB = { 1 } }), false, {
  experimental = "written in session 51: the launch bounds alone, against MAGREG",
})
