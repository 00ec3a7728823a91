-- w4a16_glu_t_persist.lua — w4a16_glu_t.lua's space with PERSIST = 1-4 (op "w4a16_glu"): about
-- PERSIST blocks an SM take the gated column tiles in turn (w4a16_gemv_t_persist.lua says why).
-- Experimental until a GPU has verified every survivor and timed it against the default space.

local EXPERIMENTAL = "PERSIST (column tiles taken in turn) has not run on a GPU yet"

return tailor.w4t_space({
  WR = { 1, 2, 4 },
  WK = { 1, 2, 4 },
  RT = { 2 },
  UNROLL = { 2 },
  SPLITK = { 1 },
  MT = { 1, 2 },
  ASMEM = { 0, 1 },
  PERSIST = tailor.W4T_PERSIST,
}, true, { experimental = EXPERIMENTAL })
