-- attention_decode.lua — search space of templates/attention_decode.cu (op "attention_decode";
-- shape keys kv_len, head_dim, heads, kv_heads, window, batch, prep). A block serves all GROUP query
-- heads of one KV head (the 16-row mma tile) over a chunk of cache slots; SPLITS is the target
-- number of chunks per (sequence, KV head); the last block to finish merges the partials, or with
-- CLUSTER = 1 (sm_90) the blocks of a (sequence, KV head) form one thread block cluster and merge
-- through distributed shared memory (no workspace, fence or ticket); with FLAT = 1 (any card)
-- every block writes its partial, waits for the others and merges a slice of the output
-- (attn_merge_flat), which needs the grid resident at once: one wave, at most a block per SM.

local slots = tailor.attn_slots
local function wm(shape) return (tailor.attn_group(shape) + 15) // 16 end
local chunk_of, nsplit_of = tailor.attn_chunk, tailor.attn_nsplit

-- With CLUSTER = 1 the launch has exactly SPLITS blocks per (sequence, KV head): the cluster size
-- is compiled in, so it cannot follow the cache length the way the workspace merge's block count
-- does; the chunk still covers all slots (attn_chunk) and the live split re-splits the filled
-- ones over the SPLITS blocks, so a linear cache tuned at one length runs any other.
-- The one split tried with CLUSTER = 1 (pruning only): the most blocks per (sequence, KV head),
-- 2 to 8, among the split targets that fill all their blocks at the tuned length (attn_nsplit)
-- while the launch stays one wave of a block per SM (the latency-bound decode the cluster merge
-- is for). The cluster merge is spread over all blocks, so unlike the last-block merge it does
-- not slow down with more of them, and fewer blocks would only stream more keys each. Returns
-- the block count (nil if none) and the reason.
local function cluster_blocks(p, shape, device)
  local pairs, sms, best = shape.batch * shape.kv_heads, tailor.sms(device), nil
  for _, t in ipairs(tailor.attn_split_targets(shape, device)) do
    if t >= 2 and t <= 8 and nsplit_of(t, p.BN, shape) == t and pairs * t <= sms
       and (not best or t > best) then
      best = t
    end
  end
  if not best then
    return nil, string.format("no split fills 2 to 8 blocks within one wave (%d pairs, %d SMs)",
                              pairs, sms)
  end
  return best, string.format("%d blocks is the split tried (the most within one wave: %d pairs, "
                             .. "%d SMs)", best, pairs, sms)
end

-- Blocks per (sequence, KV head): SPLITS itself with CLUSTER = 1, else what the split target gives.
local function blocks(p, shape)
  return p.CLUSTER == 1 and p.SPLITS or nsplit_of(p.SPLITS, p.BN, shape)
end

-- FLAT = 1 (attn_merge_flat): every live block waits at the pair's counter until all have written
-- their partials, so the whole grid must be resident at once (at most a block per SM, the same
-- rule as attention_decode_wg's SPREAD = 2); the slices of every partial are staged in the K/V
-- tile area (ATTN_ME + n float4) and the weights of the rows a slice touches, (2 n + 1) floats a
-- row, go in Q's tile. Returns nil if it fits, else why (with the numbers).
local function flat_refusal(p, n, shape, device)
  local wave = tailor.attn_one_wave("FLAT=1", shape.batch * shape.kv_heads, n, device)
  if wave then return wave end
  local d, group = shape.head_dim, tailor.attn_group(shape)
  local me, row4 = group * d // 4, d // 4
  local slen = (me + n - 1) // n
  local rows = math.min(group, (slen + row4 - 1) // row4 + 1)
  local stage, area = 16 * (me + n), 2 * 2 * p.STAGES * p.BN * (d + 8)
  if stage > area then
    return string.format("FLAT=1: the merge's stage of %d B exceeds the K/V tile area %d B", stage,
                         area)
  end
  local weights, qtile = 4 * rows * (2 * n + 1), 2 * 16 * wm(shape) * (d + 8)
  if weights > qtile then
    return string.format("FLAT=1: the merge weights' %d B exceed Q's tile, %d B", weights, qtile)
  end
  return nil
end

local function smem_bytes(p, shape)
  local bm, kstr, pstr = 16 * wm(shape), shape.head_dim + 8, p.BN + 8
  return 4 * p.WN * bm + 4 * p.STAGES * p.BN
         + 2 * (bm * kstr + 2 * p.STAGES * p.BN * kstr + bm * pstr)
end

local function min_stages(device) return device.sm >= 80 and 2 or 1 end

-- The smaller of the two tiles a card gets: 32 keys where a block of them fits at the fewest
-- stages (roomy cards at this head_dim), else 16 (the T4; head_dim 512 on 99 KB cards, where
-- 32 keys in two stages need 151 KB).
local function small_bn(shape, device)
  local big = smem_bytes({ WN = 2, BN = 32, STAGES = min_stages(device) }, shape)
  return tailor.roomy_at(device, big) and 32 or 16
end

return {
  op = "attention_decode",
  source = "attention_decode.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    -- Cards with room get the larger tiles; small ones (T4) the small (small_bn).
    BN = function(shape, dtype, device)
      return { small_bn(shape, device), 2 * small_bn(shape, device) }
    end,
    WN = { 2, 4 },
    STAGES = function(shape, dtype, device) return device.sm >= 80 and { 2, 3 } or { 1 } end,
    SPLITS = function(shape, dtype, device) return tailor.attn_split_targets(shape, device) end,
    MMA_K = function(shape, dtype, device) return { device.sm >= 80 and 16 or 8 } end,
    ASYNC = function(shape, dtype, device) return { device.sm >= 80 and 1 or 0 } end,
    -- 1: the nsplit blocks of a (sequence, KV head) are one cluster (sm_90's clusters)
    CLUSTER = function(shape, dtype, device) return device.sm >= 90 and { 0, 1 } or { 0 } end,
    -- 1: every live block merges a slice of the output (attn_merge_flat; flat_refusal)
    FLAT = { 0, 1 },
  },

  -- CLUSTER_X: the cluster's size, compiled in (__cluster_dims__) = the grid's x = SPLITS; only
  -- with CLUSTER = 1
  defines = function(p, shape, dtype, device)
    return { HEAD_DIM = shape.head_dim, GROUP = tailor.attn_group(shape), WM = wm(shape), Q_REGS = 0,
             PREP = shape.prep,
             CLUSTER_X = p.CLUSTER == 1 and p.SPLITS or nil }
  end,

  valid = function(p, shape, dtype, device, purpose)
    local d = shape.head_dim
    local ok, why = tailor.attn_shape_valid(shape, true)
    if not ok then return false, why end
    if wm(shape) * p.WN > 8 then
      return false, string.format("%d warps: more than 8", wm(shape) * p.WN)
    end
    local ns = p.BN // p.WN
    if ns ~= 8 and ns % 16 ~= 0 then
      return false, string.format("BN/WN=%d keys per warp is neither 8 nor a multiple of 16", ns)
    end
    if d // (2 * p.WN) > 128 then
      return false, string.format("WN=%d leaves %d output registers per thread", p.WN,
                                  d // (2 * p.WN))
    end
    -- pruning only (a winner tuned on a longer cache runs a shorter one: partial tiles are masked)
    if purpose ~= "launch" and p.BN > small_bn(shape, device) and p.BN > slots(shape) then
      return false, string.format("BN=%d exceeds the %d cache slots", p.BN, slots(shape))
    end
    local unfilled = purpose ~= "launch"
                     and tailor.attn_unfilled_stages(p.STAGES, chunk_of(p.SPLITS, p.BN, shape), p.BN)
    if unfilled then return false, unfilled end
    local n = blocks(p, shape)
    if p.FLAT == 1 then
      if p.CLUSTER == 1 then
        return false, "FLAT=1 and CLUSTER=1 are two merges; a kernel has one"
      end
      if purpose ~= "launch" and n < 2 then
        return false, string.format("FLAT=1 with %d block per (sequence, KV head): nothing to merge",
                                    n)
      end
      local flat = flat_refusal(p, n, shape, device)
      if flat then return false, flat end
    end
    -- Two targets rounding to the same block count would be the same launch twice.
    local rep = purpose ~= "launch" and p.CLUSTER ~= 1
                and tailor.attn_split_repeat(p, p.BN, shape, device)
    if rep then return false, rep end
    -- The merge (attn_merge_nodes) keeps GROUP * (2 nsplit + 2) floats in the K/V tile area.
    local merge = 4 * tailor.attn_group(shape) * (2 * n + 2)
    local area = 2 * 2 * p.STAGES * p.BN * (d + 8)
    if merge > area then
      return false, string.format("merge weights %d B exceed the K/V tile area %d B", merge, area)
    end
    if p.CLUSTER == 1 then
      if n < 2 or n > 8 then
        return false, string.format("CLUSTER=1 needs 2 to 8 blocks per (sequence, KV head) "
                                    .. "(a portable cluster); SPLITS=%d", p.SPLITS)
      end
      if purpose ~= "launch" then
        local best, why = cluster_blocks(p, shape, device)
        if n ~= best then return false, string.format("CLUSTER=1 with %d blocks: %s", n, why) end
      end
      -- each block's partial (rows of HEAD_DIM + 8 floats, then (max, sum) per row) in its own
      -- K/V tile area
      local part = 4 * tailor.attn_group(shape) * (d + 8) + 8 * tailor.attn_group(shape)
      if part > area then
        return false, string.format("cluster partial %d B exceeds the K/V tile area %d B", part,
                                    area)
      end
    end
    return true
  end,

  requires = function(p, shape, dtype, device)
    local r = tailor.attn_requires(p, dtype)
    if p.CLUSTER == 1 then r[#r + 1] = "cluster" end
    return r
  end,

  threads = function(p, shape, dtype, device) return 32 * wm(shape) * p.WN end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return smem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device)
    return { blocks(p, shape), shape.kv_heads, shape.batch }
  end,

  -- ws: partial outputs then (max, sum) per split; cnt: one arrival counter per (sequence, KV head)
  -- (FLAT = 1: two, the arrivals and the leavers).
  -- CLUSTER = 1 leaves both unused (the arguments stay the same; they cost one allocation).
  workspace = function(p, shape, dtype, device)
    local pairs = shape.batch * shape.kv_heads
    local n = blocks(p, shape)
    return { ws = 4 * pairs * n * tailor.attn_group(shape) * (shape.head_dim + 2),
             cnt = 4 * pairs * (p.FLAT == 1 and 2 or 1) }
  end,

  args = function(p, shape, dtype, device)
    return tailor.attn_prep_args(shape, {
             "out", "q", "k_cache", "v_cache", "positions", "qpos", "ws", "cnt",
             { i32 = "heads" }, { i32 = "kv_heads" }, { i32 = slots(shape) }, { i32 = "window" },
             { i32 = chunk_of(p.SPLITS, p.BN, shape) } })
  end,
}
