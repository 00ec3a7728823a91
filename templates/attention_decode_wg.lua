-- attention_decode_wg.lua — search space of templates/attention_decode_wg.cu (op
-- "attention_decode"; shape keys kv_len, head_dim, heads, kv_heads, window, batch, prep): decode
-- on sm_90a warpgroup MMAs with the scores transposed (the GROUP <= 8 query heads are the wgmma's
-- N), one warpgroup a block streaming BN-key tiles STAGES deep, the splits merged by
-- attention_decode_wide's tree, with the root spread over the level-1 mergers (SPREAD = 1), or in
-- one level spread over every block (SPREAD = 2). Written for the long caches (the issue-5 target
-- of 70 % of the copy bandwidth at 8k and more; docs/perf/attention.md, v6 and session 15):
-- with SPREAD = 2 it wins 32k hd512 (23.7 us, H200), 32k hd256 (14.6) and 8k hd256 (9.2 against
-- wide's 12.1). Planned at every cache length since session 40: with BN = 32 a full layer's
-- 1,024 slots are 32 blocks, and it wins E2B's full layers (H100: 10.7 -> 6.1 us at 1,024 slots
-- and head_dim 512, 12.2 -> 6.0 at 640); the 512-slot rings stay attention_decode's (4.5 us
-- against 5.1).

local slots = tailor.attn_slots

local function smem_bytes(p, shape)
  local d = shape.head_dim
  return 1024 + 8 * d * 2 + p.STAGES * 2 * p.BN * d * 2 + 1024 + 4 * p.STAGES * p.BN + 4 * 64 + 16
end

-- Blocks per (sequence, KV head) for QWAVES quarter waves of one block per SM, rounded to whole
-- tiles; and the slots each covers.
local function chunk_of(n, p, shape)
  local per = (slots(shape) + n - 1) // n
  return ((per + p.BN - 1) // p.BN) * p.BN
end
local function nsplit_for(q, p, shape, device)
  local pairs = shape.batch * shape.kv_heads
  local want = (q * tailor.sms(device) + 4 * pairs - 1) // (4 * pairs)
  want = math.max(1, math.min(want, (slots(shape) + p.BN - 1) // p.BN))
  local c = chunk_of(want, p, shape)
  return (slots(shape) + c - 1) // c
end

local QWAVES = { 4, 8 }

-- The merge for n blocks a (sequence, KV head). SPREAD = 0: attn_merge_tree, fan the smallest
-- with fan^2 >= n. SPREAD = 1: attn_merge_spread, level-1 groups of fan >= 4 leaves whose pn
-- mergers then share the root: pn at most 32 and at most half the SMs over all pairs (at most
-- pn - 1 blocks a pair wait for the others, so every block not yet resident still finds an SM).
-- SPREAD = 2: attn_merge_flat, one level: every live block waits for all the others and merges a
-- slice of the output, so the whole grid must be resident at once (at most one block per SM).
-- Returns fan, the stored nodes, the counters and the merge weights' stride (SPREAD = 2: the
-- weights' floats and the stage's float4 instead), or nil and why.
local function merge_plan(p, n, shape, device)
  if p.SPREAD == 2 then
    local wave = tailor.attn_one_wave("SPREAD=2", shape.batch * shape.kv_heads, n, device)
    if wave then return nil, wave end
    return { fan = n, nodes = n, cnts = 2, wstride = 0, flat_floats = 2 * (16 + 3 * (n + 1)),
             flat_stage = tailor.attn_group(shape) * shape.head_dim // 4 + n }
  end
  if p.SPREAD == 1 then
    local pairs = shape.batch * shape.kv_heads
    local pnmax = math.min(32, tailor.sms(device) // (2 * pairs))
    if pnmax < 2 then
      return nil, string.format("SPREAD=1: %d pairs leave fewer than 2 root mergers within half "
                                .. "of %d SMs", pairs, tailor.sms(device))
    end
    local f = math.max(4, (n + pnmax - 1) // pnmax)
    local pn = (n + f - 1) // f
    if pn < 2 then
      return nil, string.format("SPREAD=1: %d blocks make one level-1 node (fan %d): no root to "
                                .. "spread", n, f)
    end
    return { fan = f, nodes = n + pn, cnts = pn + 2, wstride = math.max(f, pn) }
  end
  local f = tailor.attn_tree_fan(n)
  local nodes, cnts = tailor.attn_tree_sizes(n, f)
  return { fan = f, nodes = nodes, cnts = cnts, wstride = f }
end

return {
  op = "attention_decode",
  source = "attention_decode_wg.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    BN = { 32, 64 },
    STAGES = { 2, 3 },
    QWAVES = QWAVES,
    SPREAD = { 0, 1, 2 },
    -- 1: qpos, the split and the first stages before the grid wait (PDL); 0: all after it
    EARLY = { 0, 1 },
  },

  -- attn_mma.cuh's helpers (live split, merge) see one warpgroup: WM = 1, WN = 4
  defines = function(p, shape, dtype, device)
    return { HEAD_DIM = shape.head_dim, GROUP = tailor.attn_group(shape), WM = 1, WN = 4,
             MMA_K = 16, Q_REGS = 0, ASYNC = 1, PREP = 0 }
  end,

  valid = function(p, shape, dtype, device, purpose)
    local ok, why = tailor.attn_shape_valid(shape, true)
    if not ok then return false, why end
    if shape.prep ~= 0 then
      return false, "prep=1: this template takes q prepared (prep = 0)"
    end
    local group = tailor.attn_group(shape)
    if group > 8 then
      return false, string.format("%d query heads per KV head: the scores' N side holds 8", group)
    end
    local n = nsplit_for(p.QWAVES, p, shape, device)
    local plan, pwhy = merge_plan(p, n, shape, device)
    if not plan then return false, pwhy end
    -- the merge's weights go in Pt and the positions (SPREAD >= 1: in Q's tile), its staged
    -- partials in the K/V area
    local merge = plan.flat_floats and 4 * plan.flat_floats or 4 * group * (2 * plan.wstride + 2)
    local room, where = 1024 + 4 * p.STAGES * p.BN, "Pt and the positions"
    if p.SPREAD >= 1 then room, where = 16 * shape.head_dim, "Q's tile" end
    if merge > room then
      return false, string.format("merge weights %d B exceed %s, %d B", merge, where, room)
    end
    -- the staged merge needs one partial of room, the spread root's slice two, the flat merge's
    -- slice of every partial ATTN_ME + n float4
    local partial = 16 * ((group * shape.head_dim + 3) // 4)
    local need = p.SPREAD == 1 and 2 * partial or p.SPREAD == 2 and 16 * plan.flat_stage or partial
    if need > p.STAGES * 2 * p.BN * shape.head_dim * 2 then
      return false, string.format("the merge's stage of %d B does not fit the K/V area", need)
    end
    if purpose ~= "launch" and QWAVES[1] < p.QWAVES and
       nsplit_for(QWAVES[1], p, shape, device) == n then
      return false, string.format("QWAVES=%d gives the same %d blocks as QWAVES=%d", p.QWAVES, n,
                                  QWAVES[1])
    end
    return true
  end,

  requires = function(p, shape, dtype, device) return tailor.wgmma_requires(dtype) end,

  threads = function(p, shape, dtype, device) return 128 end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return smem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device)
    return { nsplit_for(p.QWAVES, p, shape, device), shape.kv_heads, shape.batch }
  end,

  -- ws: tree node outputs then (max, sum); cnt: the merge's counters (merge_plan)
  workspace = function(p, shape, dtype, device)
    local pairs = shape.batch * shape.kv_heads
    local plan = merge_plan(p, nsplit_for(p.QWAVES, p, shape, device), shape, device)
    return { ws = 4 * pairs * plan.nodes * tailor.attn_group(shape) * (shape.head_dim + 2),
             cnt = 4 * pairs * plan.cnts }
  end,

  args = function(p, shape, dtype, device)
    local n = nsplit_for(p.QWAVES, p, shape, device)
    local plan = merge_plan(p, n, shape, device)
    return { "out", "q", "k_cache", "v_cache", "positions", "qpos", "ws", "cnt",
             { i32 = "heads" }, { i32 = "kv_heads" }, { i32 = slots(shape) }, { i32 = "window" },
             { i32 = chunk_of(n, p, shape) }, { i32 = plan.fan }, { i32 = plan.nodes },
             { i32 = plan.cnts } }
  end,
}
