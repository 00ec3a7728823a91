-- w4a16_gemv_t.lua — search space of templates/w4a16_gemv_t.cu (op "w4a16_matmul"; shape keys
-- m, n, k, group, zp, s_ld). Tensor-core decode for m <= 16 in the transposed form: the weights
-- are the mma's A operand (16 rows x k16, 8 weights per lane per mma), unscaled when a quad of
-- 128 columns lies in one group; WR x WK warps per block (rows x k, k reduced in shared
-- memory), RT row tiles of 16 per warp, UNROLL quads per batch of loads, SPLITK blocks per
-- column tile where the tiles alone cannot keep enough warps loading, ASMEM the block's
-- activations staged in shared memory (1) or read from L1 one quad ahead (0).

local SPLITS = { 1, 2, 3, 4, 6, 8, 12, 16 }

local function block_rows(p) return p.WR * p.RT * 16 end

-- Quads (128 columns) per row, per block slice, per warp.
local function quads(p, shape, splitk)
  local qt = tailor.ceil_div(shape.k // 32, 4)
  local qps = tailor.ceil_div(qt, splitk)
  return qt, qps, tailor.ceil_div(qps, p.WK)
end

-- ASMEM = 1: the block's activation slice, m rows of its quads' columns plus 8 of padding.
local ASMEM_MAX = 64 * 1024
local function asmem_bytes(p, shape)
  if p.ASMEM == 0 then return 0 end
  local _, qps = quads(p, shape, p.SPLITK)
  return 2 * shape.m * (128 * qps + 8)
end

local function warps_total(p, shape, splitk)
  return tailor.ceil_div(shape.n, block_rows(p)) * splitk * p.WR * p.WK
end

-- Does SPLITK=s give every block and every k warp quads, and the warps full batches?
local function split_ok(p, shape, s)
  local qt, qps, qpw = quads(p, shape, s)
  if (s - 1) * qps >= qt then return false, "empty slices" end
  if (p.WK - 1) * qpw >= qps then return false, string.format("WK=%d: idle k warps", p.WK) end
  if p.UNROLL > qpw then return false, string.format("%d quads per warp", qpw) end
  local padded = tailor.ceil_div(qpw, p.UNROLL) * p.UNROLL
  if 4 * (padded - qpw) > padded then return false, "more than 25% of a batch wasted" end
  return true
end

return {
  op = "w4a16_matmul",
  source = "w4a16_gemv_t.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    WR = { 1, 2, 4 },
    WK = { 1, 2, 4 },
    RT = { 1, 2 },
    UNROLL = { 1, 2, 3 },
    SPLITK = SPLITS,
    MT = { 1, 2 },
    ASMEM = { 0, 1 },
  },

  -- PRESCALE: groups of 32 or 64 columns put several groups in one mma, so the weights are
  -- scaled before it; whole quads per group keep them unscaled (the fix-up per quad)
  defines = function(p, shape, dtype, device)
    local prescale = 0
    if shape.group % 128 ~= 0 then prescale = 1 end
    return { GROUP = shape.group, HAS_ZP = shape.zp, PRESCALE = prescale }
  end,

  valid = function(p, shape, dtype, device, purpose)
    if shape.m > 16 then
      return false, string.format("m=%d > 16: decode template (two n8 tiles at most)", shape.m)
    end
    local lay_ok, lay_why = tailor.w4_layout_ok(shape)
    if not lay_ok then return false, lay_why end
    -- MT n8 tiles hold the activation rows: at least m of them (correctness), exactly the
    -- fewest when choosing
    local mt = tailor.ceil_div(shape.m, 8)
    if shape.m > 8 * p.MT or (purpose ~= "launch" and p.MT ~= mt) then
      return false, string.format("MT=%d n8 tiles for m=%d (%d needed)", p.MT, shape.m, mt)
    end
    -- four warps a block: the k split inside a block (WK) against the one across blocks
    -- (SPLITK) is what varies
    if p.WR * p.WK ~= 4 then
      return false, string.format("WR x WK = %d warps (4)", p.WR * p.WK)
    end
    -- loads per lane and batch 2 x RT x UNROLL (x 4 weight registers, two batches live):
    -- 4, 6 or 8; RT = 2 only with UNROLL = 2 (the activations shared by the row tiles)
    -- (UNROLL = 4 measured slower than 2 everywhere on the H200, session 7: more registers,
    -- fewer blocks resident; UNROLL = 3 is a k = 1536 warp's three quads in one batch, 0.5 µs
    -- faster than two batches of two there, session 9)
    local per = p.RT * p.UNROLL
    if per < 2 or (p.RT == 2 and p.UNROLL ~= 2) then
      return false, string.format("RT=%d UNROLL=%d: %d loads per lane and batch (4, 6 or 8; "
                                  .. "RT=2 with UNROLL=2)", p.RT, p.UNROLL, 2 * per)
    end
    if p.UNROLL == 3 and p.MT > 1 then
      return false, "UNROLL=3 with MT=2: three quads of two n8 tiles of activations spill"
    end
    local bn = block_rows(p)
    if bn > math.max(16, tailor.pow2_at_least(shape.n)) then
      return false, string.format("%d rows per block for n=%d", bn, shape.n)
    end
    local ok, why = split_ok(p, shape, p.SPLITK)
    if not ok then
      return false, string.format("SPLITK=%d WK=%d UNROLL=%d: %s", p.SPLITK, p.WK, p.UNROLL, why)
    end
    local sa = asmem_bytes(p, shape)
    if sa > ASMEM_MAX then
      return false, string.format("ASMEM=1: %d B of activations per block (at most %d)", sa,
                                  ASMEM_MAX)
    end
    local want, n_sm = 8 * tailor.sms(device), tailor.sms(device)
    local kept = tailor.split_neighbours(SPLITS,
      function(s) return (split_ok(p, shape, s)) end,
      function(s) return warps_total(p, shape, s) end, want)
    kept[1] = kept[1] or (split_ok(p, shape, 1)) -- no split won every E2B shape it could run
    if not kept[p.SPLITK] then
      return false, string.format("SPLITK=%d: %d warps for %d SMs (kept: 1 and the splits "
                                  .. "around the smallest reaching %d warps)",
                                  p.SPLITK, warps_total(p, shape, p.SPLITK), n_sm, want)
    end
    return true
  end,

  requires = function(p, shape, dtype, device)
    local r
    if device.sm >= 80 then r = { "mma.m16n8k16" } else r = { "mma.m16n8k8" } end
    if dtype == "bf16" then r[#r + 1] = "bf16" end
    return r
  end,

  threads = function(p, shape, dtype, device) return p.WR * p.WK * 32 end,
  -- __shared__ float red[WK * MT * 8 * BN]: the k warps' sums (and the split-k flag)
  smem_static = function(p, shape, dtype, device) return 4 * p.WK * p.MT * 8 * block_rows(p) end,
  -- ASMEM = 1: T sA[m][128 qps + 8]
  smem_dynamic = function(p, shape, dtype, device) return asmem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device)
    return { tailor.ceil_div(shape.n, block_rows(p)), p.SPLITK, 1 }
  end,

  -- fp32 partials [SPLITK, m, n] and one counter per column tile, left reusable by the kernel
  workspace = function(p, shape, dtype, device)
    return tailor.splitk_workspace(p, shape, tailor.ceil_div(shape.n, block_rows(p)))
  end,

  args = function(p, shape, dtype, device) return tailor.w4a16_args(p, shape) end,
}
