-- w4a16_gemv_t_ring.lua — search space of templates/w4a16_gemv_t.cu with RING (op
-- "w4a16_matmul"): the transposed tensor-core GEMV whose warps stream their batches through a
-- cp.async ring of RING slots in shared memory, RING - 1 batches ahead of the math, instead of
-- a register double buffer. Written for the big m = 1 shapes (31B, the int4 LM head), where
-- ncu found the register path at 2-4 warps a scheduler with half the DRAM bandwidth idle
-- (docs/perf/w4a16.md session 49: it did not beat the register path there). The rules are
-- spacelib's (tailor.w4t_space).

return tailor.w4t_space(tailor.w4t_params({
  TRIM = { 0 },
  RING = function(shape, dtype, device) return device.sm >= 80 and { 3, 4 } or { 0 } end,
}), false, {
  ring_only = true,
  experimental = "checked right on an H100 and an H200 (sessions 49-50); under a 50 % carveout "
    .. "7 % faster at the 31B down projection on the H200, 5 % slower at its gate|up, and the "
    .. "runtime does not ask for that carveout",
})
