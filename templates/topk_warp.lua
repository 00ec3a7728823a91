-- topk_warp.lua — search space of templates/topk_warp.cu (op "topk", k <= 128): warps keep
-- sorted lists of L keys in registers (L = 64 for k <= 64, else 128) and merge tiles of L with
-- shuffles; SPLIT blocks a row, the last one merging their lists. Shared memory is the warps'
-- lists (8 L bytes a warp). `valid` looks only at n and k, never at rows.
local function list_len(shape) return shape.k <= 64 and 64 or 128 end

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
    if shape.k > 128 then
      return false, string.format("k=%d > 128: the warps keep lists of 128 at most", shape.k)
    end
    local len = list_len(shape)
    if len == 128 and p.THREADS > 512 then
      return false, string.format("THREADS=%d with lists of 128: the compiler spills four keys "
                                  .. "a lane at 1024 threads", p.THREADS)
    end
    local slice = (shape.n + p.SPLIT - 1) // p.SPLIT
    if p.SPLIT > 1 and slice < len then
      return false, string.format("SPLIT=%d leaves %d values a block, under a tile of %d",
                                  p.SPLIT, slice, len)
    end
    if p.THREADS > 64 and slice < p.THREADS // 32 * len then
      return false, string.format("THREADS=%d: %d values a block leave warps without a tile",
                                  p.THREADS, slice)
    end
    return true
  end,

  requires = tailor.requires_dtype,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device)
    return 8 * list_len(shape) * (p.THREADS // 32)
  end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return { p.SPLIT, shape.rows, 1 } end,

  workspace = function(p, shape, dtype, device)
    return { part = 8 * shape.rows * p.SPLIT * list_len(shape), count = 4 * shape.rows }
  end,

  args = function(p, shape, dtype, device)
    return { "vals", "ids", "x", { i32 = "n" }, "part", "count" }
  end,
}
