-- w4a16_seam.lua — search space of templates/w4a16_gemv.cu built as op "w4a16_seam" (decode: an
-- int4 projection back to the hidden size followed by the layer seam in the same launch; shape
-- keys m, n, k, group, zp, mode). The GEMV of w4a16_gemv.lua; the last block to finish runs the
-- seam (include/seam.cuh) with the block's THREADS, the row in registers.

return {
  op = "w4a16_seam",
  source = "w4a16_gemv.cu",
  dtypes = { "fp16", "bf16" },

  params = tailor.W4A16_GEMV_PARAMS,

  defines = function(p, shape, dtype, device)
    local d = tailor.seam_defines(shape.n, shape.mode)
    d.GROUP, d.HAS_ZP = shape.group, shape.zp
    return d
  end,

  valid = function(p, shape, dtype, device, purpose)
    local ok, why = tailor.w4a16_gemv_valid(p, shape, purpose)
    if not ok then return false, why end
    return tailor.seam_fits(p, shape.n)
  end,

  requires = function(p, shape, dtype, device) return tailor.dtype_requires(dtype) end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return tailor.gemv_smem_static(p, 1, true) end,
  workspace = function(p, shape, dtype, device) return tailor.seam_workspace(p, shape) end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return tailor.gemv_grid(p, shape) end,

  args = function(p, shape, dtype, device)
    local n_pad = tailor.w4_scale_ld(shape) -- the scales' row stride
    local a = { "t", "a", "qweight", "scales" }
    if shape.zp ~= 0 then a[#a + 1] = "zeros" end
    tailor.seam_args(a)
    a[#a + 1] = { i32 = "m" }
    a[#a + 1] = { i32 = "n" }
    a[#a + 1] = { i32 = "k" }
    a[#a + 1] = { i32 = n_pad }
    return a
  end,
}
