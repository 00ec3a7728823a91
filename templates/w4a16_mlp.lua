-- w4a16_mlp.lua — search space of templates/w4a16_mlp.cu (op "w4a16_mlp"; shape keys m, n, k,
-- group, zp, s_ld, d_ld): a layer's int4 MLP for one decode row in one launch, gate|up (gated)
-- and down meeting at a grid-wide barrier. Every block waits there for all the others, so the
-- grid is at most one block per SM (__launch_bounds__(THREADS, 1)): every block is resident
-- whatever else the SMs hold. The space is the block size, the gate rows a warp takes at a time
-- (ROWS1, with their up rows: 2 x ROWS1 rows of loads an item, DEPTH items in flight),
-- phase 2's form (P2: 0, R2 down rows a warp; 1, a block's rows with its warps splitting k) and
-- the down chunks a lane requests before the grid wait (PF2:
-- all of its first down rows' chunks at most, held in registers through phase 1, so that the
-- down weights stream while the gate|up ones do).

-- Registers a thread holds, roughly: phase 1's rows (DEPTH items of 16 bytes, a scale and a zero
-- bias each, an accumulator), phase 2's (R2 rows of the same, unrolled loads in
-- flight) and PF2 x R2 prefetched chunks, over ~40 for addresses, loop state and the activations.
local function regs_estimate(p)
  local r2 = p.P2 == 1 and 8 or p.R2 -- P2 = 1 holds the block's rows a round (the compiler
                                      -- streams them; 8 is a middle guess)
  return 40 + 2 * p.ROWS1 * (5 + 6 * p.DEPTH) + 10 * r2 + 6 * p.PF2 * r2
end

local function blocks(p, shape, device)
  local warps = p.THREADS // 32
  local tasks = shape.n // p.ROWS1
  if p.P2 == 0 then tasks = math.max(tasks, shape.k // p.R2) end
  return math.min(tailor.sms(device), tailor.ceil_div(tasks, warps))
end

-- P2 = 1: the down rows a block takes (the last blocks may take fewer, or none)
local function block_rows(p, shape, device)
  if p.P2 == 0 then return 1 end
  return tailor.ceil_div(shape.k, blocks(p, shape, device))
end

local function scale_ld(shape)
  if shape.s_ld > 0 then return shape.s_ld end
  return (2 * shape.n + 15) // 16 * 16
end

local function down_ld(shape)
  if shape.d_ld > 0 then return shape.d_ld end
  return (shape.k + 15) // 16 * 16
end

return {
  op = "w4a16_mlp",
  source = "w4a16_mlp.cu",
  dtypes = { "fp16", "bf16" },

  -- session 35 (H100): 1,024 threads, R2 = 4 and PF2 above 2 were the slowest of every trial
  params = {
    THREADS = { 256, 512 },
    ROWS1 = { 1, 2, 4 },
    DEPTH = { 1, 2, 3 },
    P2 = { 0, 1 },
    R2 = { 1, 2 },
    PF2 = { 0, 2 },
  },

  defines = function(p, shape, dtype, device)
    return { GROUP = shape.group, HAS_ZP = shape.zp, HID = shape.k, INTER = shape.n,
             RB = block_rows(p, shape, device) }
  end,

  valid = function(p, shape, dtype, device, purpose)
    if shape.m ~= 1 then
      return false, string.format("m=%d: the fused MLP serves one decode row (m=1)", shape.m)
    end
    local ok, why = tailor.w4_layout_ok(shape) -- gate|up: k columns in groups
    if not ok then return false, why end
    if shape.n % 32 ~= 0 or shape.n % shape.group ~= 0 then
      return false, string.format("n=%d, group=%d: the down projection's layout needs 32 | group "
                                  .. "| n", shape.n, shape.group)
    end
    if shape.n % p.ROWS1 ~= 0 then
      return false, string.format("ROWS1=%d does not divide n=%d", p.ROWS1, shape.n)
    end
    if shape.k % p.R2 ~= 0 then
      return false, string.format("R2=%d does not divide k=%d", p.R2, shape.k)
    end
    if p.P2 == 1 and p.R2 ~= 1 then
      return false, "P2=1 takes the block's rows together (R2 applies to P2=0 only)"
    end
    if p.P2 == 1 and block_rows(p, shape, device) > 16 then
      return false, string.format("P2=1: %d down rows a block (k=%d over %d blocks) > 16 held "
                                  .. "at once", block_rows(p, shape, device), shape.k,
                                  blocks(p, shape, device))
    end
    local it2 = tailor.ceil_div(shape.n // 32, 32)
    if p.PF2 > it2 then
      return false, string.format("PF2=%d > %d chunks a lane reads of a down row (n=%d)", p.PF2,
                                  it2, shape.n)
    end
    -- the estimate is rough; the compiler's report ranks what is left (a little spilling of
    -- the prefetched chunks may still pay)
    local regs, cap = regs_estimate(p), math.min(255, device.regs_per_block // p.THREADS)
    if regs > cap + cap // 2 then
      return false, string.format("about %d registers a thread (ROWS1=%d, R2=%d, PF2=%d) > %d "
                                  .. "for %d threads", regs, p.ROWS1, p.R2, p.PF2, cap, p.THREADS)
    end
    local warps = p.THREADS // 32
    local g = blocks(p, shape, device)
    if g * warps * p.ROWS1 > 4 * shape.n and p.THREADS > 256 then
      return false, string.format("%d blocks x %d warps leave most warps without gate rows "
                                  .. "(n=%d, ROWS1=%d)", g, warps, shape.n, p.ROWS1)
    end
    return true
  end,

  requires = function(p, shape, dtype, device) return tailor.dtype_requires(dtype) end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  -- P2 = 1: the warps' sums of the block's rows, red[warps][RB] floats
  smem_static = function(p, shape, dtype, device)
    if p.P2 == 0 then return 0 end
    return 4 * (p.THREADS // 32) * block_rows(p, shape, device)
  end,
  -- h, staged after the barrier: n values of the dtype
  smem_dynamic = function(p, shape, dtype, device) return 2 * shape.n end,
  grid = function(p, shape, dtype, device) return { blocks(p, shape, device), 1, 1 } end,

  -- cnt: the barrier's arrive and leave counters (zeroed once, put back by the last block)
  workspace = function(p, shape, dtype, device) return { cnt = 8 } end,

  args = function(p, shape, dtype, device)
    local a = { "out", "a", "qweight", "scales" }
    if shape.zp ~= 0 then a[#a + 1] = "zeros" end
    a[#a + 1] = "dqweight"
    a[#a + 1] = "dscales"
    if shape.zp ~= 0 then a[#a + 1] = "dzeros" end
    a[#a + 1] = "h"
    a[#a + 1] = "cnt"
    a[#a + 1] = { i32 = scale_ld(shape) }
    a[#a + 1] = { i32 = down_ld(shape) }
    return a
  end,
}
