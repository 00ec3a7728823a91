-- attention_prefill_tall.lua — a second search space over templates/attention_prefill.cu (op
-- "attention_prefill"): tall warps, RM = 2 row tiles (32 query rows) per warp, so that each K
-- and V fragment a warp reads from shared memory serves 32 rows instead of 16 (half the
-- ldmatrix traffic per FLOP, the suspected limit at head_dim 256). The output columns are
-- split over WN >= 2 warps to keep the accumulators in registers; Q stays in shared memory.

local RM = 2

return {
  op = "attention_prefill",
  source = "attention_prefill.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    WM = function(shape, dtype, device) return tailor.attn_prefill_roomy(device, shape) and { 1, 2, 4 } or { 1, 2 } end,
    WN = { 2, 4 },
    BN = function(shape, dtype, device) return tailor.attn_prefill_roomy(device, shape) and { 32, 64 } or { 16, 32 } end,
    Q_REGS = { 0 },
    STAGES = function(shape, dtype, device) return device.sm >= 80 and { 1, 2 } or { 1 } end,
    MMA_K = function(shape, dtype, device) return { tailor.attn_mma_k(device) } end,
    ASYNC = function(shape, dtype, device) return { device.sm >= 80 and 1 or 0 } end,
  },

  defines = function(p, shape, dtype, device) return { HEAD_DIM = shape.head_dim, RM = RM } end,

  valid = function(p, shape, dtype, device, purpose)
    return tailor.attn_prefill_valid(p, shape, device, purpose, RM)
  end,

  requires = function(p, shape, dtype, device) return tailor.attn_requires(p, dtype) end,

  threads = function(p, shape, dtype, device) return 32 * p.WM * p.WN end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return tailor.attn_prefill_smem(p, shape, RM) end,
  grid = function(p, shape, dtype, device)
    local bm = 16 * RM * p.WM
    return { (shape.q_len + bm - 1) // bm, shape.heads, 1 }
  end,

  args = { "out", "q", "k", "v", { i32 = "q_len" }, { i32 = "kv_len" }, { i32 = "heads" },
           { i32 = "kv_heads" }, { i32 = "window" } },
}
