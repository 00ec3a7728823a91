-- w4a16_gemv_t_clamp.lua — search space of templates/w4a16_gemv_t.cu with CLAMP (op
-- "w4a16_matmul"): w4a16_gemv_t.lua's kernels whose weight loads take no bounds test each (rows,
-- quads and chunks past the weight's clamped into it; a batch past the warp's quads one
-- uniform branch). The rules are spacelib's.

return tailor.w4t_space(tailor.w4t_params({ CLAMP = { 1 } }), false, {
  magreg = true,
  experimental = "session 52: written to cut the per-load tests of the register path, ~20 of a "
    .. "quad's ~190 instructions; not yet timed on a GPU",
})
