-- matmul_pro.lua — search space of templates/matmul_gemv.cu built as op "matmul_pro" (decode:
-- the layer seam that precedes a 16-bit projection, run as the GEMV's prologue; shape keys m, n,
-- k, mode, glu, u_ld). Every block recomputes the seam of the k-wide row (one row: m = 1) into
-- shared memory with the block's THREADS, the row in registers (PRO_VEC elements per load, at
-- most 32 values per thread), then runs the GEMV of matmul_gemv.lua (glu 0) or matmul_glu.lua
-- (glu 1: stacked gate|up; 2: the PLE gate with u from a buffer) on it.

return {
  op = "matmul_pro",
  source = "matmul_gemv.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 128, 256 },
    KWARPS = { 1, 2, 4, 8 },
    ROWS = { 1, 2, 4 },
    MT = { 1 },
    UNROLL = { 1, 2, 3, 4 }, -- as matmul_gemv.lua
  },

  defines = function(p, shape, dtype, device)
    local d = tailor.pro_defines(shape.k, shape.mode)
    d.GLU = shape.glu
    d.PRO_STAGE = tailor.seam_async(p, shape.k, device)
    return d
  end,

  valid = function(p, shape, dtype, device, purpose)
    local nr = shape.glu == 1 and 2 or 1 -- weight rows per output row
    local ok, why = tailor.dense_gemv_valid(p, shape, device, purpose, nr, 2 * nr * shape.n * shape.k)
    if not ok then return false, why end
    return tailor.seam_fits(p, shape.k)
  end,

  requires = function(p, shape, dtype, device)
    return tailor.seam_requires(dtype, tailor.seam_async(p, shape.k, device))
  end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device)
    local nr = shape.glu == 1 and 2 or 1
    return tailor.gemv_smem_static(p, nr, false) + tailor.pro_smem(p, shape.k)
           + tailor.pro_stage_smem(shape.k, tailor.seam_async(p, shape.k, device))
  end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return tailor.gemv_grid(p, shape) end,

  args = function(p, shape, dtype, device)
    local a = { "out", "t", "w" } -- the kernel's a: unused, its row comes from the prologue
    if shape.glu == 2 then
      a[#a + 1] = "u"
      a[#a + 1] = { i32 = shape.u_ld > 0 and shape.u_ld or shape.n }
    end
    tailor.pro_args(a)
    a[#a + 1] = { i32 = "m" }
    a[#a + 1] = { i32 = "n" }
    a[#a + 1] = { i32 = "k" }
    return a
  end,
}
