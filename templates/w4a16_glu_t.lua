-- w4a16_glu_t.lua — search space of templates/w4a16_gemv_t.cu built as op "w4a16_glu" (decode:
-- a layer's gate|up stack of 2n int4 rows with Gemma 4's gating in the epilogue; shape keys m,
-- n, k, group, zp, s_ld). The tensor-core GEMV of w4a16_gemv_t.lua with GLU defined: each warp's
-- two row tiles are 16 gate rows and their 16 up rows (RT = 2), so a block of WR x WK warps
-- gives WR x 16 outputs; no split-k (the gating needs both whole sums in one block).

-- the stack's scale stride: s_ld, or its 2n rows rounded up to 16
local function scale_ld(shape)
  if shape.s_ld > 0 then return shape.s_ld end
  return (2 * shape.n + 15) // 16 * 16
end

return {
  op = "w4a16_glu",
  source = "w4a16_gemv_t.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    WR = { 1, 2, 4 },
    WK = { 1, 2, 4 },
    RT = { 2 },
    UNROLL = { 2 },
    SPLITK = { 1 },
    MT = { 1, 2 },
    ASMEM = { 0, 1 },
  },

  defines = function(p, shape, dtype, device)
    local prescale = 0
    if shape.group % 128 ~= 0 then prescale = 1 end
    return { GROUP = shape.group, HAS_ZP = shape.zp, PRESCALE = prescale, GLU = 1 }
  end,

  valid = function(p, shape, dtype, device, purpose)
    return tailor.w4t_valid(p, shape, device, purpose, true)
  end,

  requires = function(p, shape, dtype, device)
    local r
    if device.sm >= 80 then r = { "mma.m16n8k16" } else r = { "mma.m16n8k8" } end
    if dtype == "bf16" then r[#r + 1] = "bf16" end
    return r
  end,

  threads = function(p, shape, dtype, device) return p.WR * p.WK * 32 end,
  smem_static = function(p, shape, dtype, device) return tailor.w4t_smem_static(p) end,
  smem_dynamic = function(p, shape, dtype, device) return tailor.w4t_asmem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device) return tailor.w4t_grid(p, shape, true) end,

  args = function(p, shape, dtype, device)
    local a = { "out", "a", "qweight", "scales" }
    if shape.zp ~= 0 then a[#a + 1] = "zeros" end
    a[#a + 1] = { i32 = "m" }
    a[#a + 1] = { i32 = "n" }
    a[#a + 1] = { i32 = "k" }
    a[#a + 1] = { i32 = scale_ld(shape) }
    return a
  end,
}
