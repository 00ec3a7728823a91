-- qk_norm_rope.lua — search space of templates/qk_norm_rope.cu (op "qk_norm_rope"; shape keys
-- tokens, heads, head_dim, weight, rope, inplace). TPR threads per head row (shuffle reduction,
-- no shared memory), RPB rows per block; the space is VEC, TPR and RPB. `valid` looks only at
-- what is compiled in (head_dim): a winner tuned at one token count runs at any other.
local function rot_pairs(shape)
  if shape.rope == 1 then return shape.head_dim // 2 end
  if shape.rope == 2 then return math.floor(0.25 * shape.head_dim) // 2 end
  return 0
end

return {
  op = "qk_norm_rope",
  source = "qk_norm_rope.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    VEC = { 2, 4, 8 },
    TPR = { 8, 16, 32 },
    RPB = { 1, 2, 4, 8 },
  },

  defines = function(p, shape, dtype, device)
    return { HD = shape.head_dim, HAS_WEIGHT = shape.weight, ROT = rot_pairs(shape) }
  end,

  valid = function(p, shape, dtype, device)
    local half = shape.head_dim // 2
    if half % (p.TPR * p.VEC) ~= 0 then
      return false, string.format("head_dim/2=%d is not a multiple of TPR*VEC=%d", half,
                                  p.TPR * p.VEC)
    end
    local nit = half // (p.TPR * p.VEC)
    if nit * p.VEC > 32 then
      return false, string.format("TPR=%d VEC=%d holds %d pairs per thread (more than 32)",
                                  p.TPR, p.VEC, nit * p.VEC)
    end
    if p.TPR * p.RPB < 32 then
      return false, string.format("TPR*RPB=%d is less than a warp (the reduction shuffles "
                                  .. "across whole warps)", p.TPR * p.RPB)
    end
    return true
  end,

  requires = tailor.requires_dtype,

  threads = function(p, shape, dtype, device) return p.TPR * p.RPB end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device)
    local rows = shape.tokens * shape.heads
    return { (rows + p.RPB - 1) // p.RPB, 1, 1 }
  end,

  -- in place: the kernel reads and writes the one buffer "x"
  args = function(p, shape, dtype, device)
    return { shape.inplace == 1 and "x" or "out", "x", "w", "pos", "inv_freq",
             { i32 = shape.tokens * shape.heads }, { i32 = "heads" }, { f32 = 1e-6 } }
  end,
}
