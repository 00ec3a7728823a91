-- attention_decode_t.lua — search space of templates/attention_decode_t.cu (op "attention_decode";
-- shape keys kv_len, head_dim, heads, kv_heads, window, batch, prep). The transposed decode: the
-- GROUP <= 8 query heads of a KV head are the n8 side of the mma, WM warps each stream their own
-- 16-key tiles through a STAGES-deep ring with their own softmax; one partial per block, merged
-- by the last block (as attention_decode.cu). SPLITS is the target block count per (sequence,
-- KV head). Only a prepared q (prep = 0).

-- Exact dynamic shared memory (2-byte elements, rows padded by 8): sQ (8 rows), then each
-- warp's K and V stages of 16 rows.
local function smem_bytes(p, shape)
  local kstr = shape.head_dim + 8
  return 2 * (8 * kstr + 2 * p.WM * p.STAGES * 16 * kstr)
end

-- Registers per thread the kernel is expected to need: the O^T accumulators plus ~90 for
-- addresses, fragments and the softmax state (~130 with sm_75's m16n8k8 pairs: ptxas spilled
-- head_dim 512 there at 255 registers).
local function est_regs(p, shape) return shape.head_dim // 4 + (p.MMA_K == 8 and 130 or 90) end

local function gran(p) return 16 * p.WM end

return {
  op = "attention_decode",
  source = "attention_decode_t.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    -- Warps per block, each with its own stages: fewer at head_dim 512 (33 KB a stage) and on
    -- small cards. Few variants: the op's three templates stay under ~48 survivors per shape.
    WM = function(shape, dtype, device)
      if not tailor.roomy(device) then return { 1, 2 } end
      return shape.head_dim > 256 and { 2 } or { 2, 4 }
    end,
    -- Two stages from sm_80: one tile requested before the grid dependency wait, one in flight
    -- behind the tile being computed; one (synchronous copies) below.
    STAGES = function(shape, dtype, device) return device.sm >= 80 and { 2 } or { 1 } end,
    SPLITS = function(shape, dtype, device) return tailor.attn_split_targets(shape, device) end,
    MMA_K = function(shape, dtype, device) return { device.sm >= 80 and 16 or 8 } end,
    ASYNC = function(shape, dtype, device) return { device.sm >= 80 and 1 or 0 } end,
  },

  defines = function(p, shape, dtype, device)
    return { HEAD_DIM = shape.head_dim, GROUP = tailor.attn_group(shape), BN = 16, WN = 1,
             Q_REGS = 0, PREP = 0 }
  end,

  valid = function(p, shape, dtype, device, purpose)
    local d = shape.head_dim
    local ok, why = tailor.attn_shape_valid(shape, true)
    if not ok then return false, why end
    if shape.prep ~= 0 then
      return false, "prep=1: this template reads a prepared q (prep=0)"
    end
    if tailor.attn_group(shape) > 8 then
      return false, string.format("%d query heads per KV head: the n8 side of the mma holds 8",
                                  tailor.attn_group(shape))
    end
    local nt, regs = 32 * p.WM, est_regs(p, shape)
    if regs > 255 or nt * regs > 65536 then
      return false, string.format("%d threads x ~%d registers do not fit one SM", nt, regs)
    end
    -- The merge keeps GROUP * (nsplit + 1) weights in the K area.
    local n = tailor.attn_nsplit(p.SPLITS, gran(p), shape)
    local merge = 4 * tailor.attn_group(shape) * (n + 1)
    local area = 2 * p.WM * p.STAGES * 16 * (d + 8)
    if merge > area then
      return false, string.format("merge weights %d B exceed the K tile area %d B", merge, area)
    end
    if purpose ~= "launch" then
      local rep = tailor.attn_split_repeat(p, gran(p), shape, device)
      if rep then return false, rep end
    end
    return true
  end,

  requires = function(p, shape, dtype, device)
    local r = tailor.attn_requires(p, dtype)
    r[#r + 1] = "movmatrix"
    return r
  end,

  threads = function(p, shape, dtype, device) return 32 * p.WM end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return smem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device)
    return { tailor.attn_nsplit(p.SPLITS, gran(p), shape), shape.kv_heads, shape.batch }
  end,

  -- ws: partial outputs then (max, sum) per split; cnt: one arrival counter per (sequence, KV head).
  workspace = function(p, shape, dtype, device)
    local pairs = shape.batch * shape.kv_heads
    local n = tailor.attn_nsplit(p.SPLITS, gran(p), shape)
    return { ws = 4 * pairs * n * tailor.attn_group(shape) * (shape.head_dim + 2), cnt = 4 * pairs }
  end,

  args = function(p, shape, dtype, device)
    return { "out", "q", "k_cache", "v_cache", "positions", "qpos", "ws", "cnt",
             { i32 = "heads" }, { i32 = "kv_heads" }, { i32 = tailor.attn_slots(shape) },
             { i32 = "window" }, { i32 = tailor.attn_chunk(p.SPLITS, gran(p), shape) } }
  end,
}
