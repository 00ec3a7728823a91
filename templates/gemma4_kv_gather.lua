-- gemma4_kv_gather.lua — search space of templates/gemma4_kv_gather.cu (op "gemma4_kv_gather";
-- shape keys rows, kv_heads, head_dim, slots, first). One block per (row, KV head).
return {
  op = "gemma4_kv_gather",
  source = "gemma4_kv_gather.cu",
  dtypes = { "fp16", "bf16" },

  params = { THREADS = { 32, 64 } },

  defines = function(p, shape, dtype, device) return { HEAD_DIM = shape.head_dim } end,

  valid = function(p, shape, dtype, device)
    if shape.head_dim % 8 ~= 0 then
      return false, string.format("head_dim=%d is not a multiple of 8", shape.head_dim)
    end
    if p.THREADS > shape.head_dim // 8 and p.THREADS > 32 then
      return false, string.format("THREADS=%d > %d pieces of 16 bytes", p.THREADS,
                                  shape.head_dim // 8)
    end
    return true
  end,

  requires = tailor.requires_dtype,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return { shape.rows, shape.kv_heads, 1 } end,

  args = { "k_lin", "v_lin", "k_cache", "v_cache", { i32 = "kv_heads" }, { i32 = "slots" },
           { i32 = "first" } },
}
