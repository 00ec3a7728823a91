-- attention_prefill.lua — search space of templates/attention_prefill.cu (op "attention_prefill";
-- shape keys q_len, kv_len, head_dim, heads, kv_heads, window). A block owns BM = 16 * WM query
-- rows of one head; WN warps share each 16-row group (keys split in the score phase, head-dim
-- columns split in the P·V phase); K/V tiles of BN keys, STAGES deep (cp.async from sm_80).

local function arch_mma_k(device) return device.sm >= 80 and 16 or 8 end

-- Bytes of dynamic shared memory, exactly the layout the kernel carves (2-byte elements for both
-- dtypes; rows padded by 8 elements): sMax, sQ (unless Q_REGS), sK and sV per stage, sP (only
-- with WN > 1: a lone warp per row group keeps P in registers).
local function smem_bytes(p, shape)
  local bm, kstr, pstr = 16 * p.WM, shape.head_dim + 8, p.BN + 8
  local q = (p.Q_REGS == 1) and 0 or bm * kstr
  local pt = (p.WN > 1) and bm * pstr or 0
  return 4 * p.WN * bm + 2 * (q + 2 * p.STAGES * p.BN * kstr + pt)
end

-- 32-bit registers a thread needs for its fragments: output accumulators, Q (when kept in
-- registers) and scores. The compiler adds ~90 for addresses, softmax state and loop values.
local function fragment_regs(p, shape)
  local d = shape.head_dim
  return d // (2 * p.WN) + ((p.Q_REGS == 1) and d // 4 or 0) + p.BN // (2 * p.WN)
end

return {
  op = "attention_prefill",
  source = "attention_prefill.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    -- Cards with room (>= 100 KB per block) get the larger tiles; small ones (T4: 64 KB) the
    -- small tiles that fit at head_dim 512.
    WM = function(shape, dtype, device) return tailor.roomy(device) and { 2, 4, 8 } or { 1, 2 } end,
    WN = { 1, 2, 4 },
    BN = function(shape, dtype, device) return tailor.roomy(device) and { 32, 64 } or { 16, 32 } end,
    Q_REGS = { 0, 1 },
    STAGES = function(shape, dtype, device) return device.sm >= 80 and { 1, 2 } or { 1 } end,
    MMA_K = function(shape, dtype, device) return { arch_mma_k(device) } end,
    ASYNC = function(shape, dtype, device) return { device.sm >= 80 and 1 or 0 } end,
  },

  defines = function(p, shape, dtype, device) return { HEAD_DIM = shape.head_dim } end,

  valid = function(p, shape, dtype, device, purpose)
    local d = shape.head_dim
    local ok, why = tailor.attn_shape_valid(shape, false)
    if not ok then return false, why end
    if shape.q_len < 1 or shape.q_len > shape.kv_len then
      return false, string.format("q_len=%d must be in 1..kv_len=%d", shape.q_len, shape.kv_len)
    end
    local ns = p.BN // p.WN
    if ns ~= 8 and ns % 16 ~= 0 then
      return false, string.format("BN/WN=%d keys per warp is neither 8 nor a multiple of 16", ns)
    end
    if p.WM * p.WN > 8 then
      return false, string.format("WM*WN=%d warps: more than 8", p.WM * p.WN)
    end
    local regs = fragment_regs(p, shape)
    if regs > 160 then
      return false, string.format("fragments need %d registers per thread (O %d + Q %d + S %d) "
                                  .. "> 160: would spill", regs, d // (2 * p.WN),
                                  (p.Q_REGS == 1) and d // 4 or 0, p.BN // (2 * p.WN))
    end
    -- pruning only (a winner of the prefill chunk runs shorter chunks)
    if purpose ~= "launch" and p.WM > (tailor.roomy(device) and 2 or 1) and 16 * p.WM > 2 * shape.q_len then
      return false, string.format("BM=%d rows for q_len=%d leaves most rows idle", 16 * p.WM,
                                  shape.q_len)
    end
    if p.STAGES > 1 and p.ASYNC == 0 then
      return false, "STAGES>1 needs cp.async"
    end
    return true
  end,

  requires = function(p, shape, dtype, device) return tailor.attn_requires(p, dtype) end,

  threads = function(p, shape, dtype, device) return 32 * p.WM * p.WN end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return smem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device)
    local bm = 16 * p.WM
    return { (shape.q_len + bm - 1) // bm, shape.heads, 1 }
  end,

  args = { "out", "q", "k", "v", { i32 = "q_len" }, { i32 = "kv_len" }, { i32 = "heads" },
           { i32 = "kv_heads" }, { i32 = "window" } },
}
