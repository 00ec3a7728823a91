-- w4a16_gemv_t_l2pf.lua — search space of templates/w4a16_gemv_t.cu with L2PF (op
-- "w4a16_matmul"): w4a16_gemv_t.lua's register path whose weight loads ask L2 for the 256-byte
-- segment around them on a miss (ld.global.nc.L2::256B), so that a warp reading a row 64 bytes
-- a quad has the row's next quads in flight without holding them in registers. Written for the
-- 31B shapes, whose loads alone reach 85 % of the H100's copy rate and whose time does not
-- follow the H200's (docs/perf/w4a16.md sessions 48-49). The rules are spacelib's.

return tailor.w4t_space(tailor.w4t_params({
  L2PF = { 1 },
}), false, {
  experimental = "checked right on an H200 (session 50), within 3 % of the register path at "
    .. "the big m = 1 shapes: -2 to -3 % at two, +2 to +3 % at two",
})
