-- w4a16_mma.lua — search space of templates/w4a16_mma.cu (op "w4a16_matmul"; shape keys m, n,
-- k, group, zp). Tensor-core GEMM: BM x BN block tiles of WM x WN warps, BK columns per stage,
-- a STAGES-deep ring in dynamic shared memory, and SPLITK blocks sharing k when the tiles alone
-- cannot fill the card (decode, small n).

-- Bytes of one pipeline stage: a tile (BK + 8 per row), weight words (BK/8 per row, padded to
-- 4 mod 8 words), scales (one row per group in the stage), zero points (one byte each).
local function stage_bytes(p, shape)
  local b_ld = p.BK // 8
  if b_ld % 8 ~= 4 then b_ld = b_ld + 4 end
  local srows = 1
  if p.BK >= shape.group then srows = p.BK // shape.group end
  local z = 0
  if shape.zp ~= 0 then z = srows * p.BN end
  return p.BM * (p.BK + 8) * 2 + p.BN * b_ld * 4 + srows * p.BN * 2 + z
end

return {
  op = "w4a16_matmul",
  source = "w4a16_mma.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    BM = { 16, 32, 64, 128 },
    BN = { 64, 128, 256 },
    BK = { 32, 64, 128 },
    WM = { 1, 2, 4 },
    WN = { 1, 2, 4 },
    STAGES = { 2, 3, 4 },
    SPLITK = { 1, 2, 4, 8, 16 },
  },

  defines = function(p, shape, dtype, device)
    return { GROUP = shape.group, HAS_ZP = shape.zp }
  end,

  valid = function(p, shape, dtype, device, purpose)
    local tile_ok, tile_why = tailor.w4_tile_ok(p, shape)
    if not tile_ok then return false, tile_why end
    -- pruning only: on sm_90 the warpgroup GEMM's best beat this template's best by 25-40 % at
    -- every shape measured from m = 512 (docs/perf/w4a16.md, sessions 11-12), so where its space
    -- plans the shape, tuning does not time these
    if purpose ~= "launch" and device.sm == 90 and shape.m >= 512 and
       tailor.w4g_covers(shape, dtype, device) then
      return false, string.format("m=%d on sm_90: left to w4a16_wgmma, which beat every "
                                  .. "w4a16_mma configuration by 25-40 %% from m = 512", shape.m)
    end
    -- pruning only: at decode widths on sm_90 the GEMVs' best beat this template's best by 49 %
    -- or more at all 60 targets of an H100's and an H200's first boots and issue 4's shapes
    -- (docs/perf/w4a16.md, session 48)
    if purpose ~= "launch" and device.sm == 90 and tailor.w4t_covers(shape) then
      return false, string.format("m=%d on sm_90: left to the GEMVs, which beat every w4a16_mma "
                                  .. "configuration by 49 %% or more at decode widths", shape.m)
    end
    -- warps and their tiles: 2..8 warps, each 16..64 rows by 32..64 columns
    local warps, wtm, wtn = p.WM * p.WN, p.BM // p.WM, p.BN // p.WN
    if warps < 2 or warps > 8 then
      return false, string.format("WM*WN=%d warps (2..8 allowed)", warps)
    end
    if p.BM % p.WM ~= 0 or wtm < 16 or wtm > 64 or p.BN % p.WN ~= 0 or wtn < 32 or wtn > 64 then
      return false, string.format("warp tile %dx%d outside 16..64 x 32..64", wtm, wtn)
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
    if p.BN > math.max(64, tailor.pow2_at_least(shape.n)) then
      return false, string.format("BN=%d > n=%d rounded up", p.BN, shape.n)
    end
    -- fat tiles amortise each dequantized weight over many rows: at least 32x64 per warp
    if p.BM >= 64 and (wtm * wtn < 2048 or warps < 4) then
      return false, string.format("BM=%d wants 4+ warps of 32x64+ (have %d of %dx%d)", p.BM,
                                  warps, wtm, wtn)
    end
    -- deep k for thin tiles (decode streams weights), shallow k for fat ones
    if p.BM >= 64 and p.BK > 64 then
      return false, string.format("BK=%d > 64 with BM=%d", p.BK, p.BM)
    end
    if p.BM <= 32 and p.BK < 64 then
      return false, string.format("BK=%d < 64 with BM=%d", p.BK, p.BM)
    end
    if p.BM <= 32 and p.BK == 64 and p.STAGES == 3 and device.sm >= 80 then
      return false, "BK=64 with BM<=32 keeps 4 stages in flight (3 stages: use BK=128)"
    end
    local ktiles = tailor.ceil_div(shape.k, p.BK) // p.SPLITK
    -- split-k only where the tiles alone leave SMs idle, and not past twice the SM count
    if p.SPLITK > 1 then
      local t, n_sm = tailor.mma_tiles(p, shape), tailor.sms(device)
      if t * p.SPLITK > 2 * n_sm or 2 * t * p.SPLITK <= n_sm then
        return false, string.format("SPLITK=%d x %d tiles is outside (%d, %d] for %d SMs",
                                    p.SPLITK, t, n_sm // 2, 2 * n_sm, n_sm)
      end
      if ktiles < 2 then
        return false, string.format("SPLITK=%d leaves %d k tiles per block", p.SPLITK, ktiles)
      end
    end
    return tailor.mma_stages_valid(p, device, ktiles)
  end,

  requires = function(p, shape, dtype, device) return tailor.mma_requires(dtype, device) end,

  threads = function(p, shape, dtype, device) return p.WM * p.WN * 32 end,
  -- __shared__ int last_block[4] in the split-k epilogue
  smem_static = function(p, shape, dtype, device)
    if p.SPLITK > 1 then return 16 end
    return 0
  end,
  smem_dynamic = function(p, shape, dtype, device) return p.STAGES * stage_bytes(p, shape) end,
  grid = function(p, shape, dtype, device)
    return { tailor.ceil_div(shape.n, p.BN), tailor.ceil_div(shape.m, p.BM), p.SPLITK }
  end,

  -- fp32 partials and tile counters for split-k (tailor.splitk_workspace)
  workspace = function(p, shape, dtype, device) return tailor.splitk_workspace(p, shape) end,

  args = function(p, shape, dtype, device) return tailor.w4a16_args(p, shape) end,
}
