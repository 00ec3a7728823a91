-- matmul_glu.lua — search space of templates/matmul_gemv.cu built as op "matmul_glu" (decode:
-- the MLP's gate|up projection, or the PLE gate, with gelu_tanh gating in the epilogue; shape
-- keys m, n, k, ext, u_ld). The same CUDA-core GEMV as matmul_gemv.lua with GLU defined: each
-- warp reads its ROWS gate rows and (ext = 0) the ROWS matching up rows, so a warp holds 2*ROWS
-- rows of accumulators and loads in flight, and the limits below count both.

return {
  op = "matmul_glu",
  source = "matmul_gemv.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 128, 256 },
    KWARPS = { 1, 2, 4 },
    ROWS = { 1, 2, 4 },
    MT = { 1, 2, 4, 8 },
    UNROLL = { 1, 2, 3, 4 }, -- 16-byte pieces per row in flight (3: k = 1536 in one step at KWARPS = 2)
  },

  defines = function(p, shape, dtype, device)
    return { GLU = shape.ext == 0 and 1 or 2 }
  end,

  valid = function(p, shape, dtype, device, purpose)
    local nr = shape.ext == 0 and 2 or 1 -- weight rows per output row
    return tailor.dense_gemv_valid(p, shape, device, purpose, nr, 2 * nr * shape.n * shape.k)
  end,

  requires = function(p, shape, dtype, device) return tailor.dtype_requires(dtype) end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device)
    return tailor.gemv_smem_static(p, shape.ext == 0 and 2 or 1, false)
  end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return tailor.gemv_grid(p, shape) end,

  args = function(p, shape, dtype, device)
    if shape.ext == 0 then
      return { "out", "a", "w", { i32 = "m" }, { i32 = "n" }, { i32 = "k" } }
    end
    return { "out", "a", "w", "u", { i32 = shape.u_ld > 0 and shape.u_ld or shape.n },
             { i32 = "m" }, { i32 = "n" }, { i32 = "k" } }
  end,
}
