-- w4a16_gemv_t_magreg.lua — search space of templates/w4a16_gemv_t.cu with MAGREG (op
-- "w4a16_matmul"): w4a16_gemv_t.lua's kernels whose unscaled pairs (groups of 128) take their
-- mask and MAGIC in one LOP3, under launch bounds of one block an SM (spacelib's w4t_defines).
-- The rules are spacelib's.

return tailor.w4t_space(tailor.w4t_params(), false, {
  magreg = true,
  experimental = "session 51: 3-8 % faster than w4a16_gemv_t at every m = 1 shape timed on an "
    .. "H100, every survivor there checked right; the default once the GPU tests have run on it",
})
