-- w4a16_gemv.lua — search space of templates/w4a16_gemv.cu (op "w4a16_matmul"; shape keys m,
-- n, k, group, zp). CUDA-core GEMV for decode: a block holds THREADS/32 warps, KWARPS of which
-- split k for the same ROWS weight rows; MT activation rows share each weight load. Beyond m = 8
-- the fp32 FMAs (m per weight) outrun the memory and the tensor-core template wins.

return {
  op = "w4a16_matmul",
  source = "w4a16_gemv.cu",
  dtypes = { "fp16", "bf16" },

  params = tailor.W4A16_GEMV_PARAMS,

  defines = function(p, shape, dtype, device)
    return { GROUP = shape.group, HAS_ZP = shape.zp }
  end,

  valid = function(p, shape, dtype, device, purpose)
    return tailor.w4a16_gemv_valid(p, shape, purpose)
  end,

  requires = function(p, shape, dtype, device) return tailor.dtype_requires(dtype) end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return tailor.gemv_smem_static(p, 1, false) end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return tailor.gemv_grid(p, shape) end,

  args = function(p, shape, dtype, device)
    local n_pad = tailor.w4_scale_ld(shape) -- the scales' row stride
    local a = { "out", "a", "qweight", "scales" }
    if shape.zp ~= 0 then a[#a + 1] = "zeros" end
    a[#a + 1] = { i32 = "m" }
    a[#a + 1] = { i32 = "n" }
    a[#a + 1] = { i32 = "k" }
    a[#a + 1] = { i32 = n_pad }
    return a
  end,
}
