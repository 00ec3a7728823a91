-- w4a16_wgmma.lua — search space of templates/w4a16_wgmma.cu (op "w4a16_matmul"; shape keys m, n,
-- k, group, zp): the prefill GEMM on sm_90a warpgroup MMAs, weights dequantized into wgmma's
-- register A operand, activations its swizzled shared-memory B operand. BM tokens (the wgmma N: 64-256),
-- 64 weight rows per warpgroup, BK columns per stage.

-- Bytes of one pipeline stage, rounded up to 1024 (the next stage's swizzled tile is aligned):
-- activations, weight words (BK/8 per row, padded to 4 mod 8), scales, zero points.
local function stage_bytes(p, shape)
  local bn, w_ld = 64 * p.WG, p.BK // 8
  if w_ld % 8 ~= 4 then w_ld = w_ld + 4 end
  local srows = 1
  if p.BK >= shape.group then srows = p.BK // shape.group end
  local z = 0
  if shape.zp ~= 0 then z = srows * bn end
  local bytes = p.BM * p.BK * 2 + bn * w_ld * 4 + srows * bn * 2 + z
  return (bytes + 1023) // 1024 * 1024
end

return {
  op = "w4a16_matmul",
  source = "w4a16_wgmma.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    BM = { 64, 128, 192, 256 },
    BK = { 64, 128 },
    WG = { 1, 2, 3 },
    STAGES = { 3, 4, 5 },
    ILV = { 0, 1 },
  },

  defines = function(p, shape, dtype, device)
    return { GROUP = shape.group, HAS_ZP = shape.zp }
  end,

  valid = function(p, shape, dtype, device, purpose)
    local ok, why = tailor.w4_layout_ok(shape)
    if not ok then return false, why end
    if shape.n % 8 ~= 0 then
      return false, string.format("n=%d: the epilogue stores 8 columns at a time (n %% 8 == 0)",
                                  shape.n)
    end
    if p.BK % shape.group ~= 0 and shape.group % p.BK ~= 0 then
      return false, string.format("BK=%d and group=%d do not nest", p.BK, shape.group)
    end
    -- a prefill template: the tokens fill the wgmma's N (pruning only; any m runs)
    if purpose ~= "launch" and shape.m < 64 then
      return false, string.format("m=%d < 64: a decode shape (the GEMV templates)", shape.m)
    end
    if purpose ~= "launch" and p.BM > math.max(64, tailor.pow2_at_least(shape.m)) then
      return false, string.format("BM=%d > m=%d rounded up", p.BM, shape.m)
    end
    if 64 * p.WG > math.max(64, tailor.pow2_at_least(shape.n)) then
      return false, string.format("%d weight rows per block > n=%d rounded up", 64 * p.WG, shape.n)
    end
    -- one block per SM; registers a thread as ptxas allots them on sm_90a (BM / 2 fp32
    -- accumulators, the fragments, addresses): 64 K registers in all
    local per_thread = ({ [64] = 130, [128] = 168, [192] = 168, [256] = 192 })[p.BM]
    if per_thread * 128 * p.WG > 65536 then
      return false, string.format("%d threads x ~%d registers (BM=%d) > 65536", 128 * p.WG,
                                  per_thread, p.BM)
    end
    local ktiles = tailor.ceil_div(shape.k, p.BK)
    if p.STAGES > ktiles then
      return false, string.format("STAGES=%d > %d k tiles", p.STAGES, ktiles)
    end
    -- the epilogue stages the output tile [BM][64 WG + 8] in the ring
    local ring, staging = p.STAGES * stage_bytes(p, shape), p.BM * (64 * p.WG + 8) * 2
    if staging > ring then
      return false, string.format("the output staging (%d B) exceeds the ring (%d B)", staging, ring)
    end
    return true
  end,

  requires = function(p, shape, dtype, device)
    local r = { "wgmma", "cp.async" }
    if dtype == "bf16" then r[#r + 1] = "bf16" end
    return r
  end,

  threads = function(p, shape, dtype, device) return 128 * p.WG end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device)
    return 1024 + p.STAGES * stage_bytes(p, shape) -- + the slack that aligns the ring to 1024
  end,
  grid = function(p, shape, dtype, device)
    return { tailor.ceil_div(shape.n, 64 * p.WG), tailor.ceil_div(shape.m, p.BM), 1 }
  end,

  args = function(p, shape, dtype, device)
    return tailor.w4a16_args({ SPLITK = 1 }, shape)
  end,
}
