-- gemma4_kv_store.lua — search space of templates/gemma4_kv_store.cu (op "gemma4_kv_store";
-- shape keys tokens, kv_heads, head_dim, slots, lin, q_heads). One block per (token, KV head),
-- and per (token, q head) when q is folded in; the space is the block size.
return {
  op = "gemma4_kv_store",
  source = "gemma4_kv_store.cu",
  dtypes = { "fp16", "bf16" },

  params = { THREADS = { 32, 64, 128, 256 } },

  defines = function(p, shape, dtype, device)
    local d = { HEAD_DIM = shape.head_dim, LIN = shape.lin }
    if shape.q_heads > 0 then d.QH = shape.q_heads end -- (the template's default: 0)
    return d
  end,

  valid = function(p, shape, dtype, device)
    if shape.head_dim % 2 ~= 0 then
      return false, string.format("head_dim=%d is odd", shape.head_dim)
    end
    if p.THREADS > shape.head_dim // 2 and p.THREADS > 32 then
      return false, string.format("THREADS=%d > %d rotation pairs", p.THREADS, shape.head_dim // 2)
    end
    return true
  end,

  requires = tailor.requires_dtype,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return tailor.block_sum_smem(p) end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device)
    return { shape.tokens, shape.kv_heads + shape.q_heads, 1 }
  end,

  args = function(p, shape, dtype, device)
    local lin = shape.lin ~= 0
    local a = { "k_cache", "v_cache", "positions", lin and "k_lin" or "k_cache",
                lin and "v_lin" or "v_cache", "k", "v", "w", "inv_freq", "pos",
                { i32 = "kv_heads" }, { i32 = "slots" } }
    if shape.q_heads > 0 then
      a[#a + 1] = "q"
      a[#a + 1] = "wq"
      a[#a + 1] = "q_out"
    end
    return a
  end,
}
