-- softcap_argmax.lua — search space of templates/softcap_argmax.cu (op "softcap_argmax"; shape
-- keys rows, vocab, in_f32, write, feed). SPLIT blocks per row reduce in two phases inside one kernel
-- (the last block to finish reduces the partials); SPLIT=1 is one block per row. `valid` looks
-- only at vocab, never at rows: a winner tuned for one row runs for any number of rows.
return {
  op = "softcap_argmax",
  source = "softcap_argmax.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 64, 128, 256, 512, 1024 },
    VEC = { 4, 8 },
    SPLIT = { 1, 32, 64, 128, 256 },
  },

  defines = function(p, shape, dtype, device)
    return { IN_F32 = shape.in_f32, WRITE = shape.write, FEED = shape.feed }
  end,

  valid = function(p, shape, dtype, device)
    if shape.vocab % p.VEC ~= 0 then
      return false, string.format("vocab=%d is not a multiple of VEC=%d", shape.vocab, p.VEC)
    end
    local nvec = shape.vocab // p.VEC
    local per = (nvec + p.SPLIT - 1) // p.SPLIT
    if p.SPLIT > 1 and per < p.THREADS then
      return false, string.format("SPLIT=%d leaves %d vectors per block for %d threads", p.SPLIT,
                                  per, p.THREADS)
    end
    -- one block per row: the largest block for a big vocabulary; for a small one (tiny
    -- models), a block no wider than the row's vectors (64 threads always allowed)
    if p.SPLIT == 1 and nvec >= 1024 and p.THREADS < 1024 then
      return false, "one block per row: only the largest block is worth trying"
    end
    if p.SPLIT == 1 and p.THREADS > 64 and p.THREADS > nvec then
      return false, string.format("THREADS=%d is wider than the row's %d vectors", p.THREADS, nvec)
    end
    return true
  end,

  requires = tailor.requires_dtype,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  -- sv[NWARP] floats and si[NWARP] ints; the `last` flag when the row is split
  smem_static = function(p, shape, dtype, device)
    return 8 * (p.THREADS // 32) + (p.SPLIT > 1 and 4 or 0)
  end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return { p.SPLIT, shape.rows, 1 } end,

  -- partials of the split blocks and one arrival counter per row (zero it once; the kernel
  -- leaves it at zero)
  workspace = function(p, shape, dtype, device)
    return { part_val = 4 * shape.rows * p.SPLIT, part_idx = 4 * shape.rows * p.SPLIT,
             count = 4 * shape.rows }
  end,

  -- feed = 1 adds the rows' positions and the next step's token and position
  args = function(p, shape, dtype, device)
    local a = { "capped", "ids", "logits", { i32 = "vocab" }, "part_val", "part_idx", "count" }
    if shape.feed == 1 then
      a[#a + 1] = "pos"
      a[#a + 1] = "next_tok"
      a[#a + 1] = "next_pos"
    end
    return a
  end,
}
