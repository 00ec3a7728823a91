-- w4a16_glu_t_unroll3.lua — experimental search space of templates/w4a16_gemv_t.cu built as op
-- "w4a16_glu" (decode: a layer's gate|up stack of 2n int4 rows, Gemma 4's gating in the
-- epilogue; shape keys m, n, k, group, zp, s_ld): w4a16_glu_t.lua's kernel with a warp's quads
-- taken three at a time (UNROLL = 3 at RT = 2, MT = 1) instead of two. At k = 1536 with WK = 4 a
-- warp has three quads: w4a16_glu_t.lua runs them as two batches, the second padded with a quad
-- of zeros, where this space runs one batch of three — what made the plain GEMV 0.5 µs faster at
-- n = 6144 k = 1536 (session 9, docs/perf/w4a16.md). 166-206 registers a thread on sm_90 (142-144
-- at UNROLL = 2), no spills there nor on sm_75 and sm_86. Written without a GPU (session 29): experimental until
-- `gpu-check.sh experimental` has verified every survivor.

return {
  op = "w4a16_glu",
  source = "w4a16_gemv_t.cu",
  dtypes = { "fp16", "bf16" },
  experimental = "UNROLL = 3 at RT = 2 written without a GPU (session 29): unverified",

  params = {
    WR = { 1, 2, 4 },
    WK = { 1, 2, 4 },
    RT = { 2 },
    UNROLL = { 3 },
    SPLITK = { 1 },
    MT = { 1 },
    ASMEM = { 0, 1 },
  },

  defines = function(p, shape, dtype, device) return tailor.w4t_defines(shape, true) end,

  -- w4a16_glu_t.lua's rules, which allow RT = 2 with UNROLL = 2 alone (spacelib.lua is left as
  -- it is: an edit there changes every space's hash, and so every card's cached winners): the
  -- batches checked at UNROLL = 3 first, then the rest asked of the same configuration at
  -- UNROLL = 2 (whose batch rules pass wherever UNROLL = 3's do, so no refusal names UNROLL = 2)
  valid = function(p, shape, dtype, device, purpose)
    local ok, why = tailor.w4t_split_ok(p, shape, 1)
    if not ok then return false, string.format("WK=%d UNROLL=3: %s", p.WK, why) end
    local q = {}
    for k, v in pairs(p) do q[k] = v end
    q.UNROLL = 2
    return tailor.w4t_valid(q, shape, device, purpose, true)
  end,

  requires = function(p, shape, dtype, device) return tailor.w4t_requires(dtype, device) end,

  threads = function(p, shape, dtype, device) return p.WR * p.WK * 32 end,
  smem_static = function(p, shape, dtype, device) return tailor.w4t_smem_static(p) end,
  smem_dynamic = function(p, shape, dtype, device) return tailor.w4t_asmem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device) return tailor.w4t_grid(p, shape, true) end,

  args = function(p, shape, dtype, device) return tailor.w4a16_glu_args(shape) end,
}
