-- attention_prefill_wg.lua — search space of templates/attention_prefill_wg.cu (op
-- "attention_prefill"; shape keys q_len, kv_len, head_dim, heads, kv_heads, window): prefill
-- attention on sm_90a warpgroup MMAs at head_dim 256 and 512. A block is NWG row groups of 64
-- query rows (HP query heads of one KV head, interleaved, so that they share each K/V tile),
-- each served by head_dim / 256 warpgroups (one per 256 output columns); key tiles of BN,
-- STAGES deep; V read N-major by the wgmma itself. Verified on the H200 (tune --verify-all at
-- three shapes of each head_dim, session 12; docs/perf/attention.md, v5). STAGES = 4 and the
-- transposed-V variant (1.6x the time) left the space after that run.

-- Bytes of dynamic shared memory: the 1024-byte alignment slack, Q (64 NWG rows), STAGES x (K,
-- V) tiles of BN x head_dim, and at head_dim 512 the two warpgroups' partial scores (2 x 64 x BN
-- fp32 a row group); 2-byte elements.
local function smem_bytes(p, shape)
  local hd = shape.head_dim
  local tile = p.BN * hd * 2
  local x = hd == 512 and p.NWG * 2 * 64 * p.BN * 4 or 0
  return 1024 + 64 * p.NWG * hd * 2 + p.STAGES * 2 * tile + x
end

return {
  op = "attention_prefill",
  source = "attention_prefill_wg.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    NWG = { 1, 2 },
    BN = { 32, 64 },
    STAGES = { 2, 3 },
    HP = { 1, 2, 4, 8 },
  },

  defines = function(p, shape, dtype, device) return { HEAD_DIM = shape.head_dim } end,

  valid = function(p, shape, dtype, device, purpose)
    local ok, why = tailor.attn_shape_valid(shape, false)
    if not ok then return false, why end
    -- ~200 registers a thread (128 fp32 accumulators of O, the scores, P): two warpgroups a block
    local wgs = p.NWG * shape.head_dim // 256
    if wgs > 2 then
      return false, string.format("%d warpgroups (NWG=%d x head_dim %d / 256) x 128 threads x "
                                  .. "~200 registers > 65536", wgs, p.NWG, shape.head_dim)
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

  threads = function(p, shape, dtype, device) return 128 * p.NWG * (shape.head_dim // 256) end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return smem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device)
    return { tailor.ceil_div(shape.q_len * p.HP, 64 * p.NWG), shape.heads // p.HP, 1 }
  end,

  args = { "out", "q", "k", "v", { i32 = "q_len" }, { i32 = "kv_len" }, { i32 = "heads" },
           { i32 = "kv_heads" }, { i32 = "window" } },
}
