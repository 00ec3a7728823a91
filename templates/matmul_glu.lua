-- matmul_glu.lua — search space of templates/matmul_gemv.cu built as op "matmul_glu" (decode:
-- the MLP's gate|up projection, or the PLE gate, with gelu_tanh gating in the epilogue; shape
-- keys m, n, k, ext, u_ld). The same CUDA-core GEMV as matmul_gemv.lua with GLU defined: each
-- warp reads its ROWS gate rows and (ext = 0) the ROWS matching up rows, so a warp holds 2*ROWS
-- rows of accumulators and loads in flight, and the limits below count both.
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

local function weight_rows(p, shape) return shape.ext == 0 and 2 * p.ROWS or p.ROWS end

local function rows_per_block(p) return (p.THREADS // 32 // p.KWARPS) * p.ROWS end

return {
  op = "matmul_glu",
  source = "matmul_gemv.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 128, 256 },
    KWARPS = { 1, 2, 4 },
    ROWS = { 1, 2, 4 },
    MT = { 1, 2, 4, 8 },
    UNROLL = { 1, 2, 4 }, -- 4: 16-byte pieces per row in flight, for more bytes per SM
  },

  defines = function(p, shape, dtype, device)
    return { GLU = shape.ext == 0 and 1 or 2 }
  end,

  valid = function(p, shape, dtype, device, purpose)
    local warps = p.THREADS // 32
    local nr = weight_rows(p, shape)
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
    if p.MT * nr > 16 then
      return false, string.format("MT*%d rows=%d > 16 accumulators", nr, p.MT * nr)
    end
    if p.UNROLL * nr > 8 then
      return false, string.format("UNROLL*%d rows=%d > 8 pieces in flight per lane (registers)",
                                  nr, p.UNROLL * nr)
    end
    if p.KWARPS > warps then
      return false, string.format("KWARPS=%d > %d warps", p.KWARPS, warps)
    end
    local pieces = shape.k // 8
    if (p.KWARPS > 1 or p.UNROLL > 1) and 32 * p.KWARPS * p.UNROLL > pieces then
      return false, string.format("KWARPS*UNROLL=%d leaves lanes idle for k=%d (%d pieces of 8)",
                                  p.KWARPS * p.UNROLL, shape.k, pieces)
    end
    local rpb = rows_per_block(p)
    if rpb > shape.n and p.THREADS > 128 then
      return false, string.format("%d rows per block > n=%d", rpb, shape.n)
    end
    -- loads in flight on weights big enough to be bandwidth-bound: 32 per SM at least
    local warps_total = ceil_div(shape.n, rpb) * ceil_div(shape.m, p.MT) * warps
    local in_flight = warps_total * nr * p.UNROLL
    local need = 32 * sms(device)
    local bytes = 2 * shape.n * shape.k * (shape.ext == 0 and 2 or 1)
    if bytes >= 131072 * sms(device) and in_flight < need then
      return false, string.format("%d warps x %d rows x UNROLL=%d = %d loads in flight < %d "
                                  .. "(32 per SM)", warps_total, nr, p.UNROLL, in_flight, need)
    end
    return true
  end,

  requires = function(p, shape, dtype, device)
    if dtype == "bf16" then return { "bf16" } end
    return {}
  end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  -- __shared__ float red[warps * MT * rows], only when warps split k
  smem_static = function(p, shape, dtype, device)
    if p.KWARPS > 1 then return 4 * (p.THREADS // 32) * p.MT * weight_rows(p, shape) end
    return 0
  end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device)
    return { ceil_div(shape.n, rows_per_block(p)), ceil_div(shape.m, p.MT), 1 }
  end,

  args = function(p, shape, dtype, device)
    if shape.ext == 0 then
      return { "out", "a", "w", { i32 = "m" }, { i32 = "n" }, { i32 = "k" } }
    end
    return { "out", "a", "w", "u", { i32 = shape.u_ld > 0 and shape.u_ld or shape.n },
             { i32 = "m" }, { i32 = "n" }, { i32 = "k" } }
  end,
}
