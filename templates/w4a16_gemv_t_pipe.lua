-- w4a16_gemv_t_pipe.lua — search space of templates/w4a16_gemv_t.cu with the activations staged
-- in ASMEM = 2 or 3 pieces (op "w4a16_matmul"; shape keys m, n, k, group, zp, s_ld): the block's
-- slice requested at once as one cp.async group a piece along every warp's quads, the warps
-- computing piece p after its group lands and a barrier. Written for m = 16, where staging the
-- whole slice first (ASMEM = 1) waits ~1 µs before any math and the L1 reads (ASMEM = 0) stall
-- on four times the look-ups of a coalesced load (docs/perf/w4a16.md sessions 32-33). The rules
-- are w4a16_gemv_t.lua's (tailor.w4t_*), plus a batch at least for every piece (here, not in
-- spacelib: a base revision's templates on TAILOR_TEMPLATE_PATH still find this embedded space,
-- refused as experimental there, and its rule must not need their spacelib).

-- P pieces need P batches a warp.
local function pieces_ok(p, shape)
  local _, _, qpw = tailor.w4t_quads(p, shape, p.SPLITK)
  local batches = tailor.ceil_div(qpw, p.UNROLL)
  if batches < p.ASMEM then
    return false, string.format("ASMEM=%d pieces for %d batches a warp", p.ASMEM, batches)
  end
  return true
end

return {
  op = "w4a16_matmul",
  source = "w4a16_gemv_t.cu",
  dtypes = { "fp16", "bf16" },
  experimental = "new (session 33): the pieced staging is unverified on a GPU",

  params = {
    WR = { 1, 2, 4 },
    WK = { 1, 2, 4 },
    RT = { 1, 2 },
    UNROLL = { 1, 2, 3 },
    SPLITK = tailor.W4T_SPLITS,
    MT = { 1, 2 },
    ASMEM = { 2, 3 },
  },

  defines = function(p, shape, dtype, device) return tailor.w4t_defines(shape, false) end,

  valid = function(p, shape, dtype, device, purpose)
    local ok, why = tailor.w4t_valid(p, shape, device, purpose, false)
    if not ok then return false, why end
    return pieces_ok(p, shape)
  end,

  requires = function(p, shape, dtype, device) return tailor.w4t_requires(dtype, device) end,

  threads = function(p, shape, dtype, device) return p.WR * p.WK * 32 end,
  smem_static = function(p, shape, dtype, device) return tailor.w4t_smem_static(p) end,
  smem_dynamic = function(p, shape, dtype, device) return tailor.w4t_asmem_bytes(p, shape) end,
  grid = function(p, shape, dtype, device) return tailor.w4t_grid(p, shape, false) end,

  workspace = function(p, shape, dtype, device)
    return tailor.splitk_workspace(p, shape, tailor.ceil_div(shape.n, tailor.w4t_block_rows(p)))
  end,

  args = function(p, shape, dtype, device) return tailor.w4a16_args(p, shape) end,
}
