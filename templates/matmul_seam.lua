-- matmul_seam.lua — search space of templates/matmul_gemv.cu built as op "matmul_seam" (decode:
-- a projection back to the hidden size — o_proj, down_proj, per_layer_projection — followed by
-- the layer seam in the same launch; shape keys m, n, k, mode). The GEMV of matmul_gemv.lua;
-- the last block to finish runs the seam (include/seam.cuh) with the block's THREADS, the row
-- in registers: SEAM_VEC elements per load, at most 32 values per thread.

return {
  op = "matmul_seam",
  source = "matmul_gemv.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 128, 256 },
    KWARPS = { 1, 2, 4, 8 },
    ROWS = { 1, 2, 4 },
    MT = { 1, 2, 4, 8 },
    UNROLL = { 1, 2, 3, 4 }, -- 16-byte pieces per row in flight (3: k = 1536 in one step at KWARPS = 2)
  },

  -- the row width and the seam's variant are fixed for a model
  defines = function(p, shape, dtype, device)
    return tailor.seam_defines(shape.n, shape.mode)
  end,

  valid = function(p, shape, dtype, device, purpose)
    local ok, why = tailor.dense_gemv_valid(p, shape, device, purpose, 1, 2 * shape.n * shape.k)
    if not ok then return false, why end
    return tailor.seam_fits(p, shape.n)
  end,

  requires = function(p, shape, dtype, device) return tailor.dtype_requires(dtype) end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return tailor.gemv_smem_static(p, 1, true) end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return tailor.gemv_grid(p, shape) end,
  workspace = function(p, shape, dtype, device) return tailor.seam_workspace(p, shape) end,

  args = function(p, shape, dtype, device)
    local a = tailor.seam_args({ "t", "a", "w" })
    a[#a + 1] = { i32 = "m" }
    a[#a + 1] = { i32 = "n" }
    a[#a + 1] = { i32 = "k" }
    return a
  end,
}
