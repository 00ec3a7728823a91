-- embed.lua — search space of templates/embed.cu (op "embed"; shape keys tokens, cols, vocab,
-- scale_dim, out_f32). A gather: the space is the block size and the vector width.
return {
  op = "embed",
  source = "embed.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 64, 128, 256, 512 },
    VEC = { 2, 4, 8 },
  },

  defines = function(p, shape, dtype, device)
    return { COLS = shape.cols, OUT_F32 = shape.out_f32,
             SCALE_DIM = shape.scale_dim > 0 and shape.scale_dim or shape.cols }
  end,

  valid = function(p, shape, dtype, device)
    return tailor.row_vec_valid(p, shape.cols, "cols", 64)
  end,

  requires = tailor.requires_dtype,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device)
    local nvec = shape.cols // p.VEC
    return { (nvec + p.THREADS - 1) // p.THREADS, shape.tokens, 1 }
  end,

  args = { "out", "table", "ids", { i32 = "vocab" } },
}
