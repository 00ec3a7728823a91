-- w4a16_pro.lua — search space of templates/w4a16_gemv.cu built as op "w4a16_pro" (decode: the
-- layer seam that precedes an int4 projection, run as the GEMV's prologue; shape keys m, n, k,
-- group, zp, mode, glu). Every block recomputes the seam of the k-wide row (m = 1) into shared
-- memory with the block's THREADS (at most 32 values per thread), then runs the GEMV of
-- w4a16_gemv.lua, or with glu = 1 the gated one of w4a16_glu.lua (a gate|up stack of 2n rows).

return {
  op = "w4a16_pro",
  source = "w4a16_gemv.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 128, 256 }, -- 64 would hold 24 values of a 1536-wide row per thread: spills
    KWARPS = { 1, 2, 4 },
    ROWS = { 1, 2, 4 },
    MT = { 1 },
  },

  defines = function(p, shape, dtype, device)
    local d = tailor.pro_defines(shape.k, shape.mode)
    d.GROUP, d.HAS_ZP = shape.group, shape.zp
    if shape.glu == 1 then d.GLU = 1 end
    return d
  end,

  valid = function(p, shape, dtype, device, purpose)
    local ok, why = tailor.w4a16_gemv_valid(p, shape, purpose)
    if not ok then return false, why end
    if shape.glu == 1 and 2 * p.MT * p.ROWS > 8 then
      return false, string.format("MT*ROWS=%d x 2 (gate and up) > 8 accumulator sets",
                                  p.MT * p.ROWS)
    end
    return tailor.seam_fits(p, shape.k)
  end,

  requires = function(p, shape, dtype, device) return tailor.dtype_requires(dtype) end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device)
    return tailor.gemv_smem_static(p, shape.glu == 1 and 2 or 1, false) + tailor.pro_smem(p, shape.k)
  end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return tailor.gemv_grid(p, shape) end,

  args = function(p, shape, dtype, device)
    -- the scales' row stride: the matrix's, or with glu the stack's (2n rows)
    local n_pad = tailor.w4_scale_ld({ n = shape.glu == 1 and 2 * shape.n or shape.n,
                                       s_ld = shape.s_ld })
    local a = { "out", "t", "qweight", "scales" } -- the kernel's a: unused (the prologue's row)
    if shape.zp ~= 0 then a[#a + 1] = "zeros" end
    tailor.pro_args(a)
    a[#a + 1] = { i32 = "m" }
    a[#a + 1] = { i32 = "n" }
    a[#a + 1] = { i32 = "k" }
    a[#a + 1] = { i32 = n_pad }
    return a
  end,
}
