-- residual_norm.lua — search space of templates/residual_norm.cu (op "residual_norm"; shape keys
-- rows, cols, mode). One block per row holding the row in registers, the norms' weights staged in
-- shared memory before the grid wait; the space is the block size and the vector width.
return {
  op = "residual_norm",
  source = "residual_norm.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 32, 64, 128, 256, 512, 1024 },
    VEC = { 2, 4, 8 },
  },

  -- the width and the variant are fixed for a model; compiling them in unrolls the row
  defines = function(p, shape, dtype, device)
    return { COLS = shape.cols, MODE = shape.mode,
             RN_ASYNC = tailor.seam_async(p, shape.cols, device) }
  end,

  valid = function(p, shape, dtype, device)
    local ok, why = tailor.row_vec_valid(p, shape.cols, "cols", 32)
    if not ok then return false, why end
    local nvec = shape.cols // p.VEC
    local nit = (nvec + p.THREADS - 1) // p.THREADS
    if nit * p.VEC > 32 then
      return false, string.format("THREADS=%d VEC=%d holds %d values of a %d-wide row per thread "
                                  .. "(more than 32 registers each for a and x)",
                                  p.THREADS, p.VEC, nit * p.VEC, shape.cols)
    end
    return true
  end,

  requires = function(p, shape, dtype, device)
    return tailor.seam_requires(dtype, tailor.seam_async(p, shape.cols, device))
  end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  -- one float array (residual_norm.cu): the weights the mode reads (two rows of cols 16-bit
  -- values for modes 0 and 1, one for modes 2 and 3, staged before the grid wait), block_sum's
  -- scratch (one float per warp, at least one) and the layer scalar
  smem_static = function(p, shape, dtype, device)
    local nw = (shape.mode ~= 3 and 1 or 0) + (shape.mode ~= 2 and 1 or 0)
    local wfloats = (nw * shape.cols * 2 + 3) // 4
    return 4 * (wfloats + math.max(p.THREADS // 32, 1) + 1)
  end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return { shape.rows, 1, 1 } end,

  args = { "y", "x", "a", "w_post", "w_next", "scalar", { f32 = 1e-6 } },
}
