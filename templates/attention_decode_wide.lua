-- attention_decode_wide.lua — search space of templates/attention_decode_wide.cu (op
-- "attention_decode"; shape keys kv_len, head_dim, heads, kv_heads, window, batch, prep). A
-- block is KW key groups x WMQ row groups x WN warps; each stage holds KW x BN keys, STAGES deep
-- (cp.async from sm_80); one partial per block; a merge tree of fan-in ceil(sqrt(nsplit)).
-- QWAVES is the number of blocks in quarter waves: nsplit = QWAVES/4 x (blocks per SM) x SMs /
-- (batch x kv_heads).

local function slots(shape) return shape.window > 0 and shape.window or shape.kv_len end
local function wmq(shape) return (tailor.attn_group(shape) + 15) // 16 end
local function threads(p, shape) return 32 * p.KW * wmq(shape) * p.WN end

-- Exact dynamic shared memory (2-byte elements, rows padded by 8): sMax, sPos, sQ, sK + sV, sP.
local function smem_bytes(p, shape)
  local kb, kstr, bmv = p.KW * p.BN, shape.head_dim + 8, 16 * p.KW * wmq(shape)
  return 4 * p.WN * bmv + 4 * p.STAGES * kb
         + 2 * (16 * wmq(shape) * kstr + 2 * p.STAGES * kb * kstr + bmv * (p.BN + 8))
end

-- Registers per thread the kernel is expected to need (output fragments plus ~100 for
-- addresses, softmax state, score accumulators); only used to estimate blocks per SM.
local function est_regs(p, shape) return shape.head_dim // (2 * p.WN) + 100 end

local function blocks_per_sm(p, shape, device)
  local by_smem = device.smem_per_sm // (smem_bytes(p, shape) + 1024)
  local by_regs = 65536 // (threads(p, shape) * est_regs(p, shape))
  local by_thr = 2048 // threads(p, shape)
  return math.max(1, math.min(by_smem, by_regs, by_thr))
end

local function chunk_of(nsplit, p, shape)
  local kb = p.KW * p.BN
  local per = (slots(shape) + nsplit - 1) // nsplit
  return ((per + kb - 1) // kb) * kb
end

-- Blocks per (sequence, KV head) for QWAVES quarter waves, then rounded to whole stages.
local function nsplit_for(q, p, shape, device)
  local pairs = shape.batch * shape.kv_heads
  local want = (q * blocks_per_sm(p, shape, device) * math.max(device.sm_count, 1) + 4 * pairs - 1)
               // (4 * pairs)
  local cap = (slots(shape) + p.KW * p.BN - 1) // (p.KW * p.BN)
  want = math.max(1, math.min(want, cap))
  local c = chunk_of(want, p, shape)
  return (slots(shape) + c - 1) // c
end

local fan_of, tree_sizes = tailor.attn_tree_fan, tailor.attn_tree_sizes

local QWAVES = { 2, 4, 8 }

return {
  op = "attention_decode",
  source = "attention_decode_wide.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    -- 16 keys per key group and 8 per warp (WN = 2): the most warps per key; more parallelism
    -- comes from KW key groups (a wider stage) instead of a longer tile.
    BN = { 16 },
    -- Key groups: head_dim 512 fits 3 of 16 keys in two stages (4 would need 266 KB); at 256,
    -- 4 groups (8 warps, 64 keys a stage). Few variants: the op's survivors stay under 40.
    -- Cards without room for the fewest of them (tailor.roomy_at: the T4; 99 KB cards, where
    -- 2 groups at 512 need 152 KB and 4 at 256 need 148 KB) get 1 or 2 groups.
    KW = function(shape, dtype, device)
      local big = shape.head_dim > 256 and { 2, 3 } or { 4 }
      local least = smem_bytes({ KW = big[1], BN = 16, WN = 2,
                                 STAGES = device.sm >= 80 and 2 or 1 }, shape)
      if not tailor.roomy_at(device, least) then return { 1, 2 } end
      return big
    end,
    WN = { 2 },
    STAGES = function(shape, dtype, device) return device.sm >= 80 and { 2, 3 } or { 1 } end,
    QWAVES = QWAVES,
    MMA_K = function(shape, dtype, device) return { device.sm >= 80 and 16 or 8 } end,
    ASYNC = function(shape, dtype, device) return { device.sm >= 80 and 1 or 0 } end,
  },

  defines = function(p, shape, dtype, device)
    return { HEAD_DIM = shape.head_dim, GROUP = tailor.attn_group(shape), WMQ = wmq(shape),
             WM = p.KW * wmq(shape), Q_REGS = 0, PREP = shape.prep }
  end,

  valid = function(p, shape, dtype, device, purpose)
    local d = shape.head_dim
    local ok, why = tailor.attn_shape_valid(shape, true)
    if not ok then return false, why end
    -- 8 keys per warp in the score phase.
    local ns = p.BN // p.WN
    if ns ~= 8 then
      return false, string.format("BN/WN=%d keys per warp: this space keeps 8", ns)
    end
    if p.KW * wmq(shape) > 15 then
      return false, string.format("KW*WMQ=%d row groups: named barriers allow 15",
                                  p.KW * wmq(shape))
    end
    local nt = threads(p, shape)
    local regs = est_regs(p, shape)
    if nt > 512 or regs * nt > 65536 or regs > 255 then
      return false, string.format("%d threads x ~%d registers do not fit one SM", nt, regs)
    end
    -- The KW partial outputs are combined in the K/V area (fp32 slabs) after the stream.
    local slab = 4 * p.KW * tailor.attn_group(shape) * d
    local area = 2 * 2 * p.STAGES * p.KW * p.BN * (d + 8)
    local n = nsplit_for(p.QWAVES, p, shape, device)
    local merge = 4 * tailor.attn_group(shape) * (2 * fan_of(n) + 2) -- attn_merge_nodes
    if slab > area or merge > area then
      return false, string.format("combine slabs %d B / merge weights %d B exceed the K/V area %d B",
                                  slab, merge, area)
    end
    local unfilled = purpose ~= "launch"
                     and tailor.attn_unfilled_stages(p.STAGES, chunk_of(n, p, shape), p.KW * p.BN)
    if unfilled then return false, unfilled end
    -- Two QWAVES giving the same block count would be the same launch twice.
    for _, q in ipairs(purpose ~= "launch" and QWAVES or {}) do
      if q < p.QWAVES and nsplit_for(q, p, shape, device) == n then
        return false, string.format("QWAVES=%d gives the same %d blocks as QWAVES=%d", p.QWAVES,
                                    n, q)
      end
    end
    return true
  end,

  requires = function(p, shape, dtype, device) return tailor.attn_requires(p, dtype) end,

  threads = function(p, shape, dtype, device) return threads(p, shape) end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return smem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device)
    return { nsplit_for(p.QWAVES, p, shape, device), shape.kv_heads, shape.batch }
  end,

  -- ws: tree node outputs then (max, sum); cnt: one arrival counter per node above the leaves.
  workspace = function(p, shape, dtype, device)
    local pairs = shape.batch * shape.kv_heads
    local n = nsplit_for(p.QWAVES, p, shape, device)
    local nodes, cnts = tree_sizes(n, fan_of(n))
    return { ws = 4 * pairs * nodes * tailor.attn_group(shape) * (shape.head_dim + 2),
             cnt = 4 * pairs * cnts }
  end,

  args = function(p, shape, dtype, device)
    local n = nsplit_for(p.QWAVES, p, shape, device)
    local f = fan_of(n)
    local nodes, cnts = tree_sizes(n, f)
    return tailor.attn_prep_args(shape, {
             "out", "q", "k_cache", "v_cache", "positions", "qpos", "ws", "cnt",
             { i32 = "heads" }, { i32 = "kv_heads" }, { i32 = slots(shape) }, { i32 = "window" },
             { i32 = chunk_of(n, p, shape) }, { i32 = f }, { i32 = nodes }, { i32 = cnts } })
  end,
}
