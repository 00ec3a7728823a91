-- matmul_seam.lua — search space of templates/matmul_gemv.cu built as op "matmul_seam" (decode:
-- a projection back to the hidden size — o_proj, down_proj, per_layer_projection — followed by
-- the layer seam in the same launch; shape keys m, n, k, mode). The GEMV of matmul_gemv.lua;
-- the last block to finish runs the seam (include/seam.cuh) with the block's THREADS, the row
-- in registers: SEAM_VEC elements per load, at most 32 values per thread.
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

-- the seam's vector width: the widest of 8, 4, 2, 1 dividing the row
local function seam_vec(n)
  for _, v in ipairs({ 8, 4, 2 }) do
    if n % v == 0 then return v end
  end
  return 1
end

return {
  op = "matmul_seam",
  source = "matmul_gemv.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 128, 256 },
    KWARPS = { 1, 2, 4, 8 },
    ROWS = { 1, 2, 4 },
    MT = { 1, 2, 4, 8 },
    UNROLL = { 1, 2, 4 }, -- 4: 16-byte pieces per row in flight, for more bytes per SM
  },

  -- the row width and the seam's variant are fixed for a model
  defines = function(p, shape, dtype, device)
    return { SEAM = 1, SEAM_COLS = shape.n, SEAM_MODE = shape.mode, SEAM_VEC = seam_vec(shape.n) }
  end,

  valid = function(p, shape, dtype, device, purpose)
    local warps = p.THREADS // 32
    if shape.m > 16 then
      return false, string.format("m=%d > 16: a GEMV would be bound by its fp32 FMAs", shape.m)
    end
    if shape.k % 8 ~= 0 then
      return false, string.format("k=%d is not a multiple of 8", shape.k)
    end
    local mt = math.min(8, pow2_at_least(shape.m))
    if purpose ~= "launch" and p.MT ~= mt and p.MT * 2 ~= mt then
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
    local pieces = shape.k // 8
    if (p.KWARPS > 1 or p.UNROLL > 1) and 32 * p.KWARPS * p.UNROLL > pieces then
      return false, string.format("KWARPS*UNROLL=%d leaves lanes idle for k=%d (%d pieces of 8)",
                                  p.KWARPS * p.UNROLL, shape.k, pieces)
    end
    -- the seam holds the row in registers: a and x, at most 32 values each per thread
    local vec = seam_vec(shape.n)
    local held = ceil_div(shape.n // vec, p.THREADS) * vec
    if held > 32 then
      return false, string.format("the seam holds %d values of the %d-wide row per thread with "
                                  .. "THREADS=%d (more than 32)", held, shape.n, p.THREADS)
    end
    local warps_total = ceil_div(shape.n, rows_per_block(p)) * ceil_div(shape.m, p.MT) * warps
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
  -- red[warps * MT * ROWS] when warps split k; the seam's scratch[warps] and its ticket (an int,
  -- which ptxas pads to 16 bytes)
  smem_static = function(p, shape, dtype, device)
    local warps = p.THREADS // 32
    local red = p.KWARPS > 1 and 4 * warps * p.MT * p.ROWS or 0
    return red + 4 * warps + 4
  end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device)
    return { ceil_div(shape.n, rows_per_block(p)), ceil_div(shape.m, p.MT), 1 }
  end,
  -- one ticket counter per row group, zeroed once and put back to zero by the last block
  workspace = function(p, shape, dtype, device)
    return { counters = 4 * ceil_div(shape.m, p.MT) }
  end,

  args = { "t", "a", "w", "y", "x", "w_post", "w_next", "scalar", "counters", { f32 = 1e-6 },
           { i32 = "m" }, { i32 = "n" }, { i32 = "k" } },
}
