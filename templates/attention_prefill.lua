-- attention_prefill.lua — search space of templates/attention_prefill.cu (op "attention_prefill";
-- shape keys q_len, kv_len, head_dim, heads, kv_heads, window). A block owns BM = 16 * WM query
-- rows of one head; WN warps share each 16-row group (keys split in the score phase, head-dim
-- columns split in the P·V phase); K/V tiles of BN keys, STAGES deep (cp.async from sm_80).

return {
  op = "attention_prefill",
  source = "attention_prefill.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    -- Cards with room for them at this head_dim (>= 100 KB per block and the smallest large
    -- tile, tailor.attn_prefill_roomy) get the larger tiles; the others (T4: 64 KB; 99 KB
    -- cards at head_dim 512) the small tiles that fit at head_dim 512.
    WM = function(shape, dtype, device) return tailor.attn_prefill_roomy(device, shape) and { 2, 4, 8 } or { 1, 2 } end,
    WN = { 1, 2, 4 },
    BN = function(shape, dtype, device) return tailor.attn_prefill_roomy(device, shape) and { 32, 64 } or { 16, 32 } end,
    Q_REGS = { 0, 1 },
    STAGES = function(shape, dtype, device) return device.sm >= 80 and { 1, 2 } or { 1 } end,
    MMA_K = function(shape, dtype, device) return { tailor.attn_mma_k(device) } end,
    ASYNC = function(shape, dtype, device) return { device.sm >= 80 and 1 or 0 } end,
  },

  defines = function(p, shape, dtype, device) return { HEAD_DIM = shape.head_dim } end,

  valid = function(p, shape, dtype, device, purpose)
    return tailor.attn_prefill_valid(p, shape, device, purpose, 1)
  end,

  requires = function(p, shape, dtype, device) return tailor.attn_requires(p, dtype) end,

  threads = function(p, shape, dtype, device) return 32 * p.WM * p.WN end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return tailor.attn_prefill_smem(p, shape, 1) end,
  grid = function(p, shape, dtype, device)
    local bm = 16 * p.WM
    return { (shape.q_len + bm - 1) // bm, shape.heads, 1 }
  end,

  args = { "out", "q", "k", "v", { i32 = "q_len" }, { i32 = "kv_len" }, { i32 = "heads" },
           { i32 = "kv_heads" }, { i32 = "window" } },
}
