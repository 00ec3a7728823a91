-- gemma4_fill.lua — search space of templates/gemma4_fill.cu (op "gemma4_fill"; shape keys words,
-- mode, seed, amp_e6, off_e6). A grid-stride loop; the space is the block size and the number of
-- blocks per SM.
return {
  op = "gemma4_fill",
  source = "gemma4_fill.cu",
  dtypes = { "fp16", "bf16" },

  params = { THREADS = { 128, 256 }, BLOCKS_PER_SM = { 4, 16 } },

  valid = function(p, shape, dtype, device) return true end,

  requires = tailor.requires_dtype,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device)
    local need = (shape.words + p.THREADS - 1) // p.THREADS
    local cap = math.max(1, device.sm_count or 80) * p.BLOCKS_PER_SM
    return { math.max(1, math.min(need, cap)), 1, 1 }
  end,

  args = function(p, shape, dtype, device)
    return { "out", { i32 = "words" }, { i32 = "mode" }, { i32 = "seed" },
             { f32 = shape.amp_e6 * 1e-9 }, { f32 = shape.off_e6 * 1e-6 } }
  end,
}
