-- attention_prefill_wg.lua — search space of templates/attention_prefill_wg.cu (op
-- "attention_prefill"; shape keys q_len, kv_len, head_dim, heads, kv_heads, window): prefill
-- attention on sm_90a warpgroup MMAs at head_dim 256. A block is NWG warpgroups of 64 query
-- rows (HP query heads of one KV head, interleaved, so that they share each K/V tile); key
-- tiles of BN, STAGES deep; V transposed once per tile into a double-buffered Vᵀ. Verified on
-- the H200 (tune --verify-all at four shapes, session 12; docs/perf/attention.md, v4).

-- Bytes of dynamic shared memory: the 1024-byte alignment slack, Q (64 NWG rows), STAGES x (K,
-- V) tiles of BN x head_dim, and two Vᵀ tiles of head_dim rows of 128 bytes per 64 keys (a
-- swizzled row is 128 bytes even at BN = 32); 2-byte elements.
local function smem_bytes(p, shape)
  local tile, vt = p.BN * shape.head_dim * 2, shape.head_dim * math.max(p.BN, 64) * 2
  return 1024 + 64 * p.NWG * shape.head_dim * 2 + p.STAGES * 2 * tile + 2 * vt
end

return {
  op = "attention_prefill",
  source = "attention_prefill_wg.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    NWG = { 1, 2 },
    BN = { 32, 64 },
    STAGES = { 2, 3, 4 },
    HP = { 1, 2, 4, 8 },
  },

  defines = function(p, shape, dtype, device) return { HEAD_DIM = shape.head_dim } end,

  valid = function(p, shape, dtype, device, purpose)
    local ok, why = tailor.attn_shape_valid(shape, false)
    if not ok then return false, why end
    if shape.head_dim ~= 256 then
      return false, string.format("head_dim=%d: the P·V accumulators are one m64n256 (256 only)",
                                  shape.head_dim)
    end
    local group = tailor.attn_group(shape)
    if group % p.HP ~= 0 then
      return false, string.format("HP=%d heads a block do not divide the %d query heads of a "
                                  .. "KV head", p.HP, group)
    end
    if shape.q_len < 1 or shape.q_len > shape.kv_len then
      return false, string.format("q_len=%d must be in 1..kv_len=%d", shape.q_len, shape.kv_len)
    end
    -- pruning only (a winner of the prefill chunk runs shorter chunks)
    if purpose ~= "launch" and p.NWG > 1 and 64 * p.NWG > 2 * shape.q_len * p.HP then
      return false, string.format("BM=%d rows for q_len=%d x HP=%d leaves most rows idle",
                                  64 * p.NWG, shape.q_len, p.HP)
    end
    return true
  end,

  requires = function(p, shape, dtype, device) return tailor.wgmma_requires(dtype) end,

  threads = function(p, shape, dtype, device) return 128 * p.NWG end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return smem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device)
    return { tailor.ceil_div(shape.q_len * p.HP, 64 * p.NWG), shape.heads // p.HP, 1 }
  end,

  args = { "out", "q", "k", "v", { i32 = "q_len" }, { i32 = "kv_len" }, { i32 = "heads" },
           { i32 = "kv_heads" }, { i32 = "window" } },
}
