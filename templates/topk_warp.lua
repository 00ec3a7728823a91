-- topk_warp.lua — search space of templates/topk_warp.cu (op "topk", k <= 64): warps keep
-- sorted lists of 64 keys in registers and merge tiles with shuffles; SPLIT blocks a row, the
-- last one merging their lists. Shared memory is the warps' lists (512 B a warp). `valid` looks
-- only at n and k, never at rows.
return {
  op = "topk",
  source = "topk_warp.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 64, 128, 256, 512, 1024 },
    SPLIT = { 1, 8, 16, 32, 64, 128, 256 },
  },

  defines = function(p, shape, dtype, device) return { K = shape.k } end,

  valid = function(p, shape, dtype, device)
    if shape.k > 64 then
      return false, string.format("k=%d > 64: the warps keep lists of 64", shape.k)
    end
    local slice = (shape.n + p.SPLIT - 1) // p.SPLIT
    if p.SPLIT > 1 and slice < 64 then
      return false, string.format("SPLIT=%d leaves %d values a block, under a tile of 64",
                                  p.SPLIT, slice)
    end
    if p.THREADS > 64 and slice < p.THREADS * 2 then
      return false, string.format("THREADS=%d: %d values a block leave warps without a tile",
                                  p.THREADS, slice)
    end
    return true
  end,

  requires = tailor.requires_dtype,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return 512 * (p.THREADS // 32) end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return { p.SPLIT, shape.rows, 1 } end,

  workspace = function(p, shape, dtype, device)
    return { part = 8 * shape.rows * p.SPLIT * 64, count = 4 * shape.rows }
  end,

  args = function(p, shape, dtype, device)
    return { "vals", "ids", "x", { i32 = "n" }, "part", "count" }
  end,
}
