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
    if shape.cols % p.VEC ~= 0 then
      return false, string.format("cols=%d is not a multiple of VEC=%d", shape.cols, p.VEC)
    end
    if p.THREADS * p.VEC > 2 * shape.cols and p.THREADS > 32 then
      return false, string.format("THREADS*VEC=%d leaves most threads idle for cols=%d",
                                  p.THREADS * p.VEC, shape.cols)
    end
    return true
  end,

  requires = function(p, shape, dtype, device)
    if dtype == "bf16" then return { "bf16" } end
    return {}
  end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  -- block_sum's scratch (one float per warp); a single warp reduces with shuffles alone, and
  -- the compiler then drops the array.
  smem_static = function(p, shape, dtype, device)
    if p.THREADS <= 32 then return 0 end
    return 4 * (p.THREADS // 32)
  end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return { shape.rows, 1, 1 } end,

  args = { "out", "x", "w", { i32 = "cols" }, { f32 = 1e-6 } },
}
