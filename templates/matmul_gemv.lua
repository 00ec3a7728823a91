-- matmul_gemv.lua — search space of templates/matmul_gemv.cu (op "matmul"; shape keys m, n, k).
-- CUDA-core GEMV for decode: a block holds THREADS/32 warps, KWARPS of which split k for the
-- same ROWS weight rows; MT activation rows share each weight load; UNROLL 16-byte pieces per row
-- and lane are in flight at once. Bound by reading w: the space keeps the configurations that
-- put enough loads in flight to cover the memory latency of the whole card.
local function pow2_at_least(x)
  local p = 1
  while p < x do p = p * 2 end
  return p
end

local function ceil_div(a, b) return (a + b - 1) // b end

local function sms(device)
  if device.sm_count and device.sm_count > 0 then return device.sm_count end
  return 80
end

local function rows_per_block(p) return (p.THREADS // 32 // p.KWARPS) * p.ROWS end

return {
  op = "matmul",
  source = "matmul_gemv.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 256 },
    KWARPS = { 1, 2, 4, 8 },
    ROWS = { 1, 2, 4 },
    MT = { 1, 2, 4, 8 }, -- 16 makes ptxas spill on sm_90; m = 9..16 runs as two blocks of 8
    UNROLL = { 1, 2, 4 }, -- 4: 16-byte pieces per row in flight, for more bytes per SM
  },

  valid = function(p, shape, dtype, device, purpose)
    local warps = p.THREADS // 32
    if shape.m > 16 then
      return false, string.format("m=%d > 16: a GEMV would be bound by its fp32 FMAs", shape.m)
    end
    if shape.k % 8 ~= 0 then
      return false, string.format("k=%d is not a multiple of 8", shape.k)
    end
    -- one m tile covering m, or half of it (two blocks share the weight through L2)
    local mt = math.min(8, pow2_at_least(shape.m))
    if purpose ~= "launch" and p.MT ~= mt and p.MT * 2 ~= mt then -- pruning: any MT is right
      return false, string.format("MT=%d does not fit m=%d (use %d or %d)", p.MT, shape.m, mt,
                                  mt // 2)
    end
    if p.MT * p.ROWS > 16 then
      return false, string.format("MT*ROWS=%d > 16 accumulators", p.MT * p.ROWS)
    end
    if p.UNROLL * p.ROWS > 8 then
      return false, string.format("UNROLL*ROWS=%d > 8 pieces in flight per lane (registers)",
                                  p.UNROLL * p.ROWS)
    end
    if p.KWARPS > warps then
      return false, string.format("KWARPS=%d > %d warps", p.KWARPS, warps)
    end
    -- every lane gets at least one full step of UNROLL pieces (beyond the simplest configuration)
    local pieces = shape.k // 8
    if (p.KWARPS > 1 or p.UNROLL > 1) and 32 * p.KWARPS * p.UNROLL > pieces then
      return false, string.format("KWARPS*UNROLL=%d leaves lanes idle for k=%d (%d pieces of 8)",
                                  p.KWARPS * p.UNROLL, shape.k, pieces)
    end
    local rpb = rows_per_block(p)
    if rpb > shape.n and p.THREADS > 128 then
      return false, string.format("%d rows per block > n=%d", rpb, shape.n)
    end
    -- loads in flight: on weights big enough to be bandwidth-bound (128 KiB per SM and more),
    -- at least 32 warps' worth of one 16-byte load per lane, per SM
    local warps_total = ceil_div(shape.n, rpb) * ceil_div(shape.m, p.MT) * warps
    local in_flight = warps_total * p.ROWS * p.UNROLL
    local need = 32 * sms(device)
    if 2 * shape.n * shape.k >= 131072 * sms(device) and in_flight < need then
      return false, string.format("%d warps x ROWS*UNROLL=%d = %d loads in flight < %d (32 per SM)",
                                  warps_total, p.ROWS * p.UNROLL, in_flight, need)
    end
    return true
  end,

  requires = function(p, shape, dtype, device)
    if dtype == "bf16" then return { "bf16" } end
    return {}
  end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  -- __shared__ float red[warps * MT * ROWS], only when warps split k
  smem_static = function(p, shape, dtype, device)
    if p.KWARPS > 1 then return 4 * (p.THREADS // 32) * p.MT * p.ROWS end
    return 0
  end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device)
    return { ceil_div(shape.n, rows_per_block(p)), ceil_div(shape.m, p.MT), 1 }
  end,

  args = { "out", "a", "w", { i32 = "m" }, { i32 = "n" }, { i32 = "k" } },
}
