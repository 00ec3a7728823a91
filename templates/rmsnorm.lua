-- rmsnorm.lua — search space of templates/rmsnorm.cu (op "rmsnorm"; shape keys rows, cols,
-- weight). One block per row; the space is the block size and the vector width.
return {
  op = "rmsnorm",
  source = "rmsnorm.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 32, 64, 128, 256, 512, 1024 },
    VEC = { 1, 2, 4, 8 },
  },

  -- Shape-derived compile-time constants (part of the kernel name).
  defines = function(p, shape, dtype, device)
    return { HAS_WEIGHT = shape.weight }
  end,

  valid = function(p, shape, dtype, device)
    return tailor.row_vec_valid(p, shape.cols, "cols", 32)
  end,

  requires = tailor.requires_dtype,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return tailor.block_sum_smem(p) end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return { shape.rows, 1, 1 } end,

  args = { "out", "x", "w", { i32 = "cols" }, { f32 = 1e-6 } },
}
