-- w4a16_gemv_t_pp.lua — search space of templates/w4a16_gemv_t.cu with PP (op "w4a16_matmul"):
-- w4a16_gemv_t.lua's register path with its batch loop unrolled by two, so that the batch
-- carried from one trip to the next is renamed, not copied register by register (TRIM, whose
-- batches end at run time, is left out). The rules are spacelib's.

return tailor.w4t_space(tailor.w4t_params({ PP = { 1 }, TRIM = { 0 } }), false, {
  experimental = "written in session 51: compiled, not yet run on a GPU",
})
