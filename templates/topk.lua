-- topk.lua — search space of templates/topk.cu (op "topk"; shape keys rows, n, k). SPLIT blocks
-- per row each sort a slice of CHUNK_P keys in shared memory; with SPLIT > 1 the last block to
-- finish sorts their SPLIT x k survivors (MERGE_P keys). Shared memory is 8 bytes a key of the
-- larger sort, so the card's opt-in limit decides how few blocks may share a long row. `valid`
-- looks only at n and k, never at rows.
local function pow2_at_least(x)
  local p = 1
  while p < x do p = p * 2 end
  return p
end

local function slice(p, shape) return (shape.n + p.SPLIT - 1) // p.SPLIT end
local function chunk_p(p, shape) return pow2_at_least(slice(p, shape)) end
local function merge_p(p, shape) return p.SPLIT > 1 and pow2_at_least(p.SPLIT * shape.k) or 1 end

return {
  op = "topk",
  source = "topk.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 128, 256, 512, 1024 },
    SPLIT = { 1, 8, 16, 32, 64, 128, 256 },
  },

  defines = function(p, shape, dtype, device)
    return { K = shape.k, CHUNK_P = chunk_p(p, shape), MERGE_P = merge_p(p, shape) }
  end,

  valid = function(p, shape, dtype, device)
    if p.SPLIT > 1 and slice(p, shape) < shape.k then
      return false, string.format("SPLIT=%d leaves %d values a block, fewer than k=%d", p.SPLIT,
                                  slice(p, shape), shape.k)
    end
    local widest = math.max(chunk_p(p, shape), merge_p(p, shape))
    if p.THREADS > 128 and 2 * p.THREADS > widest then
      return false, string.format("THREADS=%d > half of the widest sort's %d keys", p.THREADS,
                                  widest)
    end
    return true
  end,

  requires = tailor.requires_dtype,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device)
    return 8 * math.max(chunk_p(p, shape), merge_p(p, shape))
  end,
  grid = function(p, shape, dtype, device) return { p.SPLIT, shape.rows, 1 } end,

  -- each split block's k best keys, and one arrival counter per row (zero it once; the kernel
  -- leaves it at zero)
  workspace = function(p, shape, dtype, device)
    return { part = 8 * shape.rows * p.SPLIT * shape.k, count = 4 * shape.rows }
  end,

  args = function(p, shape, dtype, device)
    return { "vals", "ids", "x", { i32 = "n" }, "part", "count" }
  end,
}
