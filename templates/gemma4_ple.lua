-- gemma4_ple.lua — search space of templates/gemma4_ple.cu (op "gemma4_ple"; shape keys tokens,
-- layers, dim, hidden, gather). One block per (token, layer); the space is the block size.
-- gather = 1: e is the whole table on the device and ids pick each token's row.
return {
  op = "gemma4_ple",
  source = "gemma4_ple.cu",
  dtypes = { "fp16", "bf16" },

  params = { THREADS = { 32, 64, 128, 256 } },

  valid = function(p, shape, dtype, device)
    if p.THREADS > shape.dim and p.THREADS > 32 then
      return false, string.format("THREADS=%d > dim=%d", p.THREADS, shape.dim)
    end
    return true
  end,

  requires = tailor.requires_dtype,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return tailor.block_sum_smem(p) end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return { shape.tokens * shape.layers, 1, 1 } end,

  defines = function(p, shape, dtype, device) return { GATHER = shape.gather } end,

  args = function(p, shape, dtype, device)
    local a = { "out", "c", "e", "w", { i32 = "dim" }, { i32 = "hidden" } }
    if shape.gather == 1 then
      a[#a + 1] = "ids"
      a[#a + 1] = { i32 = "layers" }
    end
    return a
  end,
}
