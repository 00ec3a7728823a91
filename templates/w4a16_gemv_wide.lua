-- w4a16_gemv_wide.lua — search space of templates/w4a16_gemv_wide.cu (op "w4a16_matmul"; shape
-- keys m, n, k, group, zp). Tensor-core decode for m <= 16, weights streamed from global memory
-- into registers (UNROLL quads x RT row tiles of 16-byte loads per lane, double-buffered), the
-- block's slice of the activations staged once in shared memory, SPLITK blocks per column tile
-- when the tiles alone cannot keep enough warps loading. m = 16 costs what m = 1 does.

local SPLITS = { 1, 2, 3, 4, 6, 8, 12, 16, 24, 32 }

-- Quads (128 columns) per row, per slice, and staged per slice (whole batches of UNROLL).
local function quads(p, shape)
  local qt = tailor.ceil_div(shape.k // 32, 4)
  local qps = tailor.ceil_div(qt, p.SPLITK)
  local qalloc = tailor.ceil_div(qps, p.UNROLL) * p.UNROLL
  return qt, qps, qalloc
end

local function block_rows(p) return p.WARPS * p.RT * 8 end

-- Shared memory: MP rows x qalloc quads x 256 bytes of staged activations, plus a 16-byte zero
-- row for the ldmatrix lanes of rows >= MP (MP <= 8).
local function smem_bytes(p, shape)
  local _, _, qalloc = quads(p, shape)
  local z = 0
  if p.MP <= 8 then z = 16 end
  return p.MP * qalloc * 256 + z
end

local function warps_total(p, shape, splitk)
  return tailor.ceil_div(shape.n, block_rows(p)) * splitk * p.WARPS
end

-- Does SPLITK=s give a useful slice: no empty block, no more than 25 % of a slice's batches
-- wasted, activations within 48 KiB?
local function split_ok(p, shape, s)
  local q = { SPLITK = s, UNROLL = p.UNROLL, MP = p.MP, WARPS = p.WARPS, RT = p.RT }
  local qt, qps, qalloc = quads(q, shape)
  if (s - 1) * qps >= qt then return false, "empty slices" end
  if p.UNROLL > qps then return false, "UNROLL > quads per slice" end
  if 4 * (qalloc - qps) > qalloc then return false, "more than 25% of a batch wasted" end
  if smem_bytes(q, shape) + 16 > 48 * 1024 then return false, "shared memory > 48 KiB" end
  return true
end

return {
  op = "w4a16_matmul",
  source = "w4a16_gemv_wide.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    WARPS = { 4, 8 },
    RT = { 1, 2 },
    UNROLL = { 1, 2, 4 },
    SPLITK = SPLITS,
    MP = { 1, 2, 4, 8, 16 },
  },

  defines = function(p, shape, dtype, device)
    return { GROUP = shape.group, HAS_ZP = shape.zp }
  end,

  valid = function(p, shape, dtype, device, purpose)
    if shape.m > 16 then
      return false, string.format("m=%d > 16: decode template (one mma row tile)", shape.m)
    end
    local lay_ok, lay_why = tailor.w4_layout_ok(shape)
    if not lay_ok then return false, lay_why end
    -- MP rows are staged: at least m of them (correctness); exactly m rounded up when choosing
    if shape.m > p.MP or (purpose ~= "launch" and p.MP ~= tailor.pow2_at_least(shape.m)) then
      return false, string.format("MP=%d is not m=%d rounded up to a power of two", p.MP,
                                  shape.m)
    end
    -- block shapes: 32 or 64 rows for m <= 8 (staging is cheap, blocks many); 64 or 128 for
    -- m > 8 (the staged activations, 16 rows, are reused by more weight rows)
    local bn = block_rows(p)
    if p.MP <= 8 and bn > 64 then
      return false, string.format("%d rows per block for m=%d (32 or 64)", bn, shape.m)
    end
    if p.MP > 8 and bn < 64 then
      return false, string.format("%d rows per block for m=%d (64 or 128)", bn, shape.m)
    end
    if p.RT * p.WARPS * 8 > math.max(32, 2 * tailor.pow2_at_least(shape.n)) then
      return false, string.format("%d rows per block for n=%d", block_rows(p), shape.n)
    end
    -- few loads per lane only where the slices are short
    local ok, why = split_ok(p, shape, p.SPLITK)
    if not ok then
      return false, string.format("SPLITK=%d UNROLL=%d: %s", p.SPLITK, p.UNROLL, why)
    end
    if p.UNROLL == 1 then
      local _, qps = quads(p, shape)
      if qps > 2 then return false, string.format("UNROLL=1 with %d quads per slice", qps) end
    end
    -- SPLITK: the smallest usable split giving 8 warps per SM, the one before and the one
    -- after; where none gets there, the two largest usable ones
    local want, n_sm = 8 * tailor.sms(device), tailor.sms(device)
    local allowed = tailor.split_neighbours(SPLITS,
      function(s) return (split_ok(p, shape, s)) end,
      function(s) return warps_total(p, shape, s) end, want)
    if not allowed[p.SPLITK] then
      return false, string.format("SPLITK=%d: %d warps for %d SMs (kept: the splits around "
                                  .. "the smallest reaching %d warps)",
                                  p.SPLITK, warps_total(p, shape, p.SPLITK), n_sm, want)
    end
    return true
  end,

  requires = function(p, shape, dtype, device)
    local r
    if device.sm >= 80 then
      r = { "ldmatrix", "mma.m16n8k16" }
    else
      r = { "ldmatrix", "mma.m16n8k8" }
    end
    if dtype == "bf16" then r[#r + 1] = "bf16" end
    return r
  end,

  threads = function(p, shape, dtype, device) return p.WARPS * 32 end,
  -- __shared__ int last_block[4] in the split-k epilogue
  smem_static = function(p, shape, dtype, device)
    if p.SPLITK > 1 then return 16 end
    return 0
  end,
  smem_dynamic = function(p, shape, dtype, device) return smem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device)
    return { tailor.ceil_div(shape.n, block_rows(p)), p.SPLITK, 1 }
  end,

  -- fp32 partials [SPLITK, m, n] and one counter per column tile; the kernel leaves both
  -- reusable (partials are overwritten before they are read, counters reset by the last block).
  workspace = function(p, shape, dtype, device)
    return tailor.splitk_workspace(p, shape, tailor.ceil_div(shape.n, block_rows(p)))
  end,

  args = function(p, shape, dtype, device) return tailor.w4a16_args(p, shape) end,
}
