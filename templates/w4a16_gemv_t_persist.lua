-- w4a16_gemv_t_persist.lua — w4a16_gemv_t.lua's space with PERSIST = 1-4 (op "w4a16_matmul"):
-- about PERSIST blocks an SM take the column tiles in turn, a warp's next tile's first batch in
-- flight while it computes the last batch of the current one (w4a16_gemv_t.cu; why in
-- docs/perf/w4a16.md, session 42). Experimental until a GPU has verified every survivor and
-- timed it against the default space.

local EXPERIMENTAL = "PERSIST (column tiles taken in turn) has not run on a GPU yet"

return tailor.w4t_space({
  WR = { 1, 2, 4 },
  WK = { 1, 2, 4 },
  RT = { 1, 2 },
  UNROLL = { 1, 2, 3 },
  SPLITK = { 1 },
  MT = { 1, 2 },
  ASMEM = { 0, 1 },
  PERSIST = tailor.W4T_PERSIST,
}, false, { experimental = EXPERIMENTAL })
