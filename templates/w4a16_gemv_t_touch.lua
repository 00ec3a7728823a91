-- w4a16_gemv_t_touch.lua — experimental search space of templates/w4a16_gemv_t.cu (op
-- "w4a16_matmul"; shape keys m, n, k, group, zp, s_ld): the transposed tensor-core decode of
-- w4a16_gemv_t.lua with its activations read from global memory (ASMEM 0) and, first, touched
-- into L1 (TOUCH: every lane reads one word of each 32-byte sector its warp's quads will read,
-- all in one L2 round trip, instead of a round trip per quad as load_a first reaches each quad),
-- and with four row tiles a warp (RT = 4 at UNROLL = 1: the activations of a quad shared by 64
-- weight rows instead of 16 or 32, for the same weight registers as RT = 2 at UNROLL = 2).
-- For m = 16, where session 28's ncu report put half of the warps' stalls on L1TEX waits (80 %
-- hits) and the shape ran 1.45x-1.89x its m = 1 time (issue 4 asks 1.3x). Written without a GPU:
-- experimental until `gpu-check.sh experimental` has verified every survivor.

-- A warp reads at most this many 32-byte sectors a lane (one register each until they land).
local TOUCH_MAX = 24

-- rows load_a reads (min(m, 8 MT)) x 8 sectors a quad x the warp's quads, over 32 lanes
local function touch_loads(p, shape)
  local _, _, qpw = tailor.w4t_quads(p, shape, p.SPLITK)
  local rows = math.min(shape.m, 8 * p.MT)
  return tailor.ceil_div(rows * 8 * qpw, 32), 8 * qpw
end

return {
  op = "w4a16_matmul",
  source = "w4a16_gemv_t.cu",
  dtypes = { "fp16", "bf16" },
  experimental = "TOUCH and RT = 4 written without a GPU (session 28): unverified",

  params = {
    WR = { 1, 2, 4 },
    WK = { 1, 2, 4 },
    RT = { 1, 2, 4 },
    UNROLL = { 1, 2, 3 },
    SPLITK = tailor.W4T_SPLITS,
    MT = { 1, 2 },
    ASMEM = { 0 },
    TOUCHED = { 0, 1 }, -- 1: touched (the define TOUCH carries the loads a lane issues)
  },

  defines = function(p, shape, dtype, device)
    local d = tailor.w4t_defines(shape, false)
    if p.TOUCHED == 1 then d.TOUCH, d.TOUCH_SPR = touch_loads(p, shape) end
    return d
  end,

  valid = function(p, shape, dtype, device, purpose)
    -- what w4a16_gemv_t.lua plans already (TOUCH = 0 at RT <= 2) is not planned twice
    if p.TOUCHED == 0 and p.RT ~= 4 then
      return false, "TOUCHED=0 RT<=2: w4a16_gemv_t.lua's configuration"
    end
    if p.RT == 4 and p.UNROLL ~= 1 then
      return false, string.format("RT=4 UNROLL=%d: 255 registers and spills (UNROLL=1 only)",
                                  p.UNROLL)
    end
    local ok, why = tailor.w4t_valid(p, shape, device, purpose, false)
    if not ok then return false, why end
    if p.TOUCHED == 1 and device.sm < 80 then
      -- ptxas holds some of them at 128 registers for sm_75 and spills (cli_plan_compile)
      return false, string.format("TOUCH on sm_%d: spills there, untried (sm_80 and later)",
                                  device.sm)
    end
    -- pruning only: a kernel touched for one shape reads within the rows and columns of any
    -- other it runs (touch_a's bounds), it just touches less or more of them
    if p.TOUCHED == 1 and purpose ~= "launch" then
      local n = touch_loads(p, shape)
      if n > TOUCH_MAX then
        return false, string.format("TOUCH: %d sector loads a lane (at most %d)", n, TOUCH_MAX)
      end
    end
    return true
  end,

  requires = function(p, shape, dtype, device) return tailor.w4t_requires(dtype, device) end,

  threads = function(p, shape, dtype, device) return p.WR * p.WK * 32 end,
  -- the k warps' sums, as w4a16_gemv_t.lua, and (TOUCH) the word the touched loads are stored to
  smem_static = function(p, shape, dtype, device)
    return tailor.w4t_smem_static(p) + 4 * p.TOUCHED
  end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device) return tailor.w4t_grid(p, shape, false) end,

  workspace = function(p, shape, dtype, device)
    return tailor.splitk_workspace(p, shape, tailor.ceil_div(shape.n, tailor.w4t_block_rows(p)))
  end,

  args = function(p, shape, dtype, device) return tailor.w4a16_args(p, shape) end,
}
