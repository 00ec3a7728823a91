-- w4a16_seam.lua — search space of templates/w4a16_gemv.cu built as op "w4a16_seam" (decode: an
-- int4 projection back to the hidden size followed by the layer seam in the same launch; shape
-- keys m, n, k, group, zp, mode). The GEMV of w4a16_gemv.lua; the last block to finish runs the
-- seam (include/seam.cuh) with the block's THREADS, the row in registers.
local function pow2_at_least(x)
  local p = 1
  while p < x do p = p * 2 end
  return p
end

-- the seam's vector width: the widest of 8, 4, 2, 1 dividing the row
local function seam_vec(n)
  for _, v in ipairs({ 8, 4, 2 }) do
    if n % v == 0 then return v end
  end
  return 1
end

return {
  op = "w4a16_seam",
  source = "w4a16_gemv.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 64, 128, 256 },
    KWARPS = { 1, 2, 4 },
    ROWS = { 1, 2, 4 },
    MT = { 1, 2, 4, 8 },
  },

  defines = function(p, shape, dtype, device)
    return { GROUP = shape.group, HAS_ZP = shape.zp, SEAM = 1, SEAM_COLS = shape.n,
             SEAM_MODE = shape.mode, SEAM_VEC = seam_vec(shape.n) }
  end,

  valid = function(p, shape, dtype, device, purpose)
    local warps = p.THREADS // 32
    if shape.m > 8 then
      return false, string.format("m=%d > 8: a GEMV would be bound by its fp32 FMAs", shape.m)
    end
    if shape.k % 32 ~= 0 or shape.group % 32 ~= 0 or shape.k % shape.group ~= 0 then
      return false, string.format("k=%d, group=%d: the layout needs 32 | group | k",
                                  shape.k, shape.group)
    end
    -- one m tile covering m, or half of it (two blocks share the weight through L2)
    local mt = pow2_at_least(shape.m)
    if purpose ~= "launch" and p.MT ~= mt and p.MT * 2 ~= mt then -- pruning: any MT is right
      return false, string.format("MT=%d does not fit m=%d (MT is m rounded up to a power of "
                                  .. "two, %d, or half of it)", p.MT, shape.m, mt)
    end
    if p.MT * p.ROWS > 8 then
      return false, string.format("MT*ROWS=%d > 8 accumulator sets", p.MT * p.ROWS)
    end
    if p.KWARPS > warps then
      return false, string.format("KWARPS=%d > %d warps", p.KWARPS, warps)
    end
    local chunks = shape.k // 32
    if p.KWARPS > 1 and 32 * p.KWARPS > 2 * chunks then
      return false, string.format("KWARPS=%d leaves most lanes idle for k=%d (%d chunks)",
                                  p.KWARPS, shape.k, chunks)
    end
    local rows_per_block = (warps // p.KWARPS) * p.ROWS
    if rows_per_block > shape.n and p.THREADS > 64 then
      return false, string.format("%d rows per block > n=%d", rows_per_block, shape.n)
    end
    -- the seam holds the row in registers: a and x, at most 32 values each per thread
    local vec = seam_vec(shape.n)
    local held = (shape.n // vec + p.THREADS - 1) // p.THREADS * vec
    if held > 32 then
      return false, string.format("the seam holds %d values of the %d-wide row per thread with "
                                  .. "THREADS=%d (more than 32)", held, shape.n, p.THREADS)
    end
    return true
  end,

  requires = function(p, shape, dtype, device)
    if dtype == "bf16" then return { "bf16" } end
    return {}
  end,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  -- red[warps * MT * ROWS] when warps split k; the seam's scratch[warps] and its ticket
  smem_static = function(p, shape, dtype, device)
    local warps = p.THREADS // 32
    local red = p.KWARPS > 1 and 4 * warps * p.MT * p.ROWS or 0
    return red + 4 * warps + 4
  end,
  -- one ticket counter per row group, zeroed once and put back to zero by the last block
  workspace = function(p, shape, dtype, device)
    return { counters = 4 * ((shape.m + p.MT - 1) // p.MT) }
  end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device)
    local rows_per_block = (p.THREADS // 32 // p.KWARPS) * p.ROWS
    return { (shape.n + rows_per_block - 1) // rows_per_block, (shape.m + p.MT - 1) // p.MT, 1 }
  end,

  args = function(p, shape, dtype, device)
    local n_pad = (shape.n + 15) // 16 * 16
    local a = { "t", "a", "qweight", "scales" }
    if shape.zp ~= 0 then a[#a + 1] = "zeros" end
    for _, b in ipairs({ "y", "x", "w_post", "w_next", "scalar", "counters" }) do a[#a + 1] = b end
    a[#a + 1] = { f32 = 1e-6 }
    a[#a + 1] = { i32 = "m" }
    a[#a + 1] = { i32 = "n" }
    a[#a + 1] = { i32 = "k" }
    a[#a + 1] = { i32 = n_pad }
    return a
  end,
}
