-- gelu_gate.lua — search space of templates/gelu_gate.cu (op "gelu_gate"; shape keys rows,
-- inter, g_ld, u_ld). Elementwise: the space is the block size, the vector width and the
-- vectors per thread.
return {
  op = "gelu_gate",
  source = "gelu_gate.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 128, 256, 512 },
    VEC = { 2, 4, 8 },
    ITEMS = { 1, 2, 4 },
  },

  valid = function(p, shape, dtype, device)
    local gld = shape.g_ld > 0 and shape.g_ld or shape.inter
    local uld = shape.u_ld > 0 and shape.u_ld or shape.inter
    if shape.inter % p.VEC ~= 0 or gld % p.VEC ~= 0 or uld % p.VEC ~= 0 then
      return false, string.format("inter=%d, g_ld=%d or u_ld=%d is not a multiple of VEC=%d",
                                  shape.inter, gld, uld, p.VEC)
    end
    local per_block = p.THREADS * p.VEC * p.ITEMS
    if per_block > 2 * shape.inter and per_block > 256 then
      return false, string.format("THREADS*VEC*ITEMS=%d leaves most threads idle for inter=%d",
                                  per_block, shape.inter)
    end
    return true
  end,

  requires = tailor.requires_dtype,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device)
    local per_block = p.THREADS * p.VEC * p.ITEMS
    return { (shape.inter + per_block - 1) // per_block, shape.rows, 1 }
  end,

  args = function(p, shape, dtype, device)
    return { "h", "g", "u", { i32 = "inter" },
             { i32 = shape.g_ld > 0 and shape.g_ld or shape.inter },
             { i32 = shape.u_ld > 0 and shape.u_ld or shape.inter } }
  end,
}
