-- w4a16_gemv.lua — search space of templates/w4a16_gemv.cu (op "w4a16_matmul"; shape keys m,
-- n, k, group, zp). CUDA-core GEMV for decode: a block holds THREADS/32 warps, KWARPS of which
-- split k for the same ROWS weight rows; MT activation rows share each weight load. Beyond m = 8
-- the fp32 FMAs (m per weight) outrun the memory and the tensor-core template wins.
local function pow2_at_least(x)
  local p = 1
  while p < x do p = p * 2 end
  return p
end

return {
  op = "w4a16_matmul",
  source = "w4a16_gemv.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 64, 128, 256 },
    KWARPS = { 1, 2, 4 },
    ROWS = { 1, 2, 4 },
    MT = { 1, 2, 4, 8 },
  },

  defines = function(p, shape, dtype, device)
    return { GROUP = shape.group, HAS_ZP = shape.zp }
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
    local rows_per_block = (p.THREADS // 32 // p.KWARPS) * p.ROWS
    return { (shape.n + rows_per_block - 1) // rows_per_block, (shape.m + p.MT - 1) // p.MT, 1 }
  end,

  args = function(p, shape, dtype, device)
    local n_pad = (shape.n + 15) // 16 * 16
    local a = { "out", "a", "qweight", "scales" }
    if shape.zp ~= 0 then a[#a + 1] = "zeros" end
    a[#a + 1] = { i32 = "m" }
    a[#a + 1] = { i32 = "n" }
    a[#a + 1] = { i32 = "k" }
    a[#a + 1] = { i32 = n_pad }
    return a
  end,
}
