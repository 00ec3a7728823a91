-- matmul_mma.lua — search space of templates/matmul_mma.cu (op "matmul"; shape keys m, n, k).
-- Tensor-core GEMM: BM x BN block tiles of WM x WN warps, BK columns per stage, a STAGES-deep
-- ring in dynamic shared memory, and SPLITK blocks sharing k when the tiles alone cannot fill
-- the card (decode, small n).

-- Bytes of one pipeline stage: a tile and w tile, rows of BK + 8 values of 2 bytes.
local function stage_bytes(p) return (p.BM + p.BN) * (p.BK + 8) * 2 end

return {
  op = "matmul",
  source = "matmul_mma.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    BM = { 16, 32, 64, 128 },
    BN = { 32, 64, 128, 256 },
    BK = { 32, 64, 128 },
    WM = { 1, 2, 4 },
    WN = { 1, 2, 4 },
    STAGES = { 2, 3, 4 },
    SPLITK = { 1, 2, 4, 8 },
  },

  valid = function(p, shape, dtype, device, purpose)
    if shape.k % 8 ~= 0 then
      return false, string.format("k=%d is not a multiple of 8", shape.k)
    end
    -- warps and their tiles: 2..8 warps, each 16..64 rows by 16..64 columns
    local warps, wtm, wtn = p.WM * p.WN, p.BM // p.WM, p.BN // p.WN
    if warps < 2 or warps > 8 then
      return false, string.format("WM*WN=%d warps (2..8 allowed)", warps)
    end
    if p.BM % p.WM ~= 0 or wtm % 16 ~= 0 or wtm > 64 or p.BN % p.WN ~= 0 or wtn % 16 ~= 0
        or wtn > 64 then
      return false, string.format("warp tile %dx%d outside 16..64 x 16..64 (multiples of 16)",
                                  p.BM // p.WM, p.BN // p.WN)
    end
    -- block rows follow m: one 16-row tile for decode, 64+ for prefill (pruning only: a winner
    -- tuned at the prefill chunk runs every narrower m of the runtime)
    local mp = math.max(16, tailor.pow2_at_least(shape.m))
    if purpose ~= "launch" and p.BM > mp then
      return false, string.format("BM=%d > m=%d rounded up (%d)", p.BM, shape.m, mp)
    end
    if purpose ~= "launch" and shape.m >= 128 and p.BM < 64 then
      return false, string.format("BM=%d < 64 for m=%d", p.BM, shape.m)
    end
    if p.BN > math.max(32, tailor.pow2_at_least(shape.n)) then
      return false, string.format("BN=%d > n=%d rounded up", p.BN, shape.n)
    end
    if p.BM >= 64 then
      -- fat tiles: 4+ warps of at least 32x64 (fewer shared-memory reads per mma)
      if wtm * wtn < 2048 or warps < 4 then
        return false, string.format("BM=%d wants 4+ warps of 32x64+ (have %d of %dx%d)", p.BM,
                                    warps, wtm, wtn)
      end
      if p.BK > 64 then
        return false, string.format("BK=%d > 64 with BM=%d", p.BK, p.BM)
      end
      -- 128 to 192 columns of k in flight: BK=32 with 4 stages, BK=64 with 3
      local depth = p.BK * p.STAGES
      if device.sm >= 80 and p.STAGES > 2 and depth ~= 128 and depth ~= 192 then
        return false, string.format("BK=%d with STAGES=%d (BM>=64: BK=32 with 4, BK=64 with 3)",
                                    p.BK, p.STAGES)
      end
    else
      -- thin tiles stream w: deep k per stage, 64+ columns per block, warps side by side in n
      if p.BK < 64 then
        return false, string.format("BK=%d < 64 with BM=%d", p.BK, p.BM)
      end
      if p.BN < 64 then
        return false, string.format("BN=%d < 64 with BM=%d", p.BN, p.BM)
      end
      if p.WM > 1 or p.WN ~= 4 then
        return false, string.format("WM=%d WN=%d with BM=%d (thin tiles: 4 warps side by side)",
                                    p.WM, p.WN, p.BM)
      end
    end
    local ktiles = tailor.ceil_div(shape.k, p.BK) // p.SPLITK
    -- split-k only where the tiles alone leave SMs idle, and not past twice the SM count
    if p.SPLITK > 1 then
      local t, n_sm = tailor.mma_tiles(p, shape), tailor.sms(device)
      if t >= n_sm or t * p.SPLITK > 2 * n_sm or 2 * t * p.SPLITK <= n_sm then
        return false, string.format("SPLITK=%d x %d tiles: split only below %d tiles, into "
                                    .. "(%d, %d] blocks", p.SPLITK, t, n_sm, n_sm // 2, 2 * n_sm)
      end
      if ktiles < 2 then
        return false, string.format("SPLITK=%d leaves %d k tiles per block", p.SPLITK, ktiles)
      end
    end
    local ok, why = tailor.mma_stages_valid(p, device, ktiles)
    if not ok then return false, why end
    if device.sm >= 80 and p.BM < 64 and p.STAGES == 3 and p.BK == 64 and ktiles >= 3 then
      return false, "BK=64 with BM<64 keeps 4 stages in flight (3 stages: use BK=128)"
    end
    return true
  end,

  requires = function(p, shape, dtype, device) return tailor.mma_requires(dtype, device) end,

  threads = function(p, shape, dtype, device) return p.WM * p.WN * 32 end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return p.STAGES * stage_bytes(p) end,
  grid = function(p, shape, dtype, device)
    return { tailor.ceil_div(shape.n, p.BN), tailor.ceil_div(shape.m, p.BM), p.SPLITK }
  end,

  -- fp32 partials and tile counters for split-k (tailor.splitk_workspace)
  workspace = function(p, shape, dtype, device) return tailor.splitk_workspace(p, shape) end,

  args = function(p, shape, dtype, device)
    local a = { "out", "a", "w" }
    if p.SPLITK > 1 then
      a[#a + 1] = "partial"
      a[#a + 1] = "counters"
    end
    a[#a + 1] = { i32 = "m" }
    a[#a + 1] = { i32 = "n" }
    a[#a + 1] = { i32 = "k" }
    return a
  end,
}
