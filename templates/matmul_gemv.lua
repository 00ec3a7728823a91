-- matmul_gemv.lua — search space of templates/matmul_gemv.cu (op "matmul"; shape keys m, n, k).
-- CUDA-core GEMV for decode: a block holds THREADS/32 warps, KWARPS of which split k for the
-- same ROWS weight rows; MT activation rows share each weight load; UNROLL 16-byte pieces per row
-- and lane are in flight at once. Bound by reading w: the space keeps the configurations that
-- put enough loads in flight to cover the memory latency of the whole card.

return {
  op = "matmul",
  source = "matmul_gemv.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 256 },
    KWARPS = { 1, 2, 4, 8 },
    ROWS = { 1, 2, 4 },
    MT = { 1, 2, 4, 8 }, -- 16 makes ptxas spill on sm_90; m = 9..16 runs as two blocks of 8
    UNROLL = { 1, 2, 3, 4 }, -- 16-byte pieces per row in flight (3: k = 1536 in one step at KWARPS = 2)
  },

  valid = function(p, shape, dtype, device, purpose)
    return tailor.dense_gemv_valid(p, shape, device, purpose, 1, 2 * shape.n * shape.k)
  end,

  requires = function(p, shape, dtype, device) return tailor.dtype_requires(dtype) end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return tailor.gemv_smem_static(p, 1, false) end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return tailor.gemv_grid(p, shape) end,

  args = { "out", "a", "w", { i32 = "m" }, { i32 = "n" }, { i32 = "k" } },
}
