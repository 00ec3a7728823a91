-- matmul_pro_staged.lua — experimental search space of templates/matmul_gemv.cu built as op
-- "matmul_pro" with WSTAGE: the decode GEMV with the layer seam as its prologue (matmul_pro.lua),
-- whose warps request WSTAGE more steps of their weights before the grid wait, with cp.async into
-- dynamic shared memory, beside the first step in registers. Sessions 16-26 measured the
-- prologue GEMVs ~2-3 µs above their bytes in the step: after the wait only the first step's
-- weights were in flight while the prologue's chain ran. Here up to WSTAGE + 1 steps are.

return {
  op = "matmul_pro",
  source = "matmul_gemv.cu",
  dtypes = { "fp16", "bf16" },
  experimental = "written without a GPU (session 26): unverified, unmeasured",

  params = {
    THREADS = { 128, 256 },
    KWARPS = { 1, 2 },
    ROWS = { 1, 2, 4 },
    MT = { 1 },
    UNROLL = { 1, 2 },
    WSTAGE = { 1, 2, 3, 5 },
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
    -- the lane with the fewest pieces has WSTAGE full steps after its first
    local steps = (shape.k // 8) // (32 * p.KWARPS) // p.UNROLL
    if steps < p.WSTAGE + 1 then
      return false, string.format("WSTAGE=%d needs %d full steps of UNROLL=%d a lane; k=%d "
                                  .. "gives %d", p.WSTAGE, p.WSTAGE + 1, p.UNROLL, shape.k, steps)
    end
    return tailor.seam_fits(p, shape.k)
  end,

  requires = function(p, shape, dtype, device)
    local r = tailor.seam_requires(dtype, tailor.seam_async(p, shape.k, device))
    if tailor.seam_async(p, shape.k, device) == 0 then r[#r + 1] = "cp.async" end
    return r
  end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device)
    local nr = shape.glu == 1 and 2 or 1
    return tailor.gemv_smem_static(p, nr, false) + tailor.pro_smem(p, shape.k)
           + tailor.pro_stage_smem(shape.k, tailor.seam_async(p, shape.k, device))
  end,
  -- each warp's slots: WSTAGE steps x UNROLL pieces x its weight rows x 32 lanes x 16 bytes
  smem_dynamic = function(p, shape, dtype, device)
    local nr = shape.glu == 1 and 2 or 1
    return (p.THREADS // 32) * p.WSTAGE * p.UNROLL * nr * p.ROWS * 32 * 16
  end,
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
