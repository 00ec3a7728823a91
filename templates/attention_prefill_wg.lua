-- attention_prefill_wg.lua — search space of templates/attention_prefill_wg.cu (op
-- "attention_prefill"; shape keys q_len, kv_len, head_dim, heads, kv_heads, window): prefill
-- attention on sm_90a warpgroup MMAs at head_dim 256 and 512. A block is NWG row groups of 64
-- query rows (HP query heads of one KV head, interleaved, so that they share each K/V tile),
-- each served by head_dim / 256 warpgroups (one per 256 output columns); key tiles of BN,
-- STAGES deep; V read N-major by the wgmma itself; each tile's P·V retired at the end of the
-- tile (RETIRE = 1). Verified on the H200 (tune --verify-all at three shapes of each head_dim,
-- sessions 12 and 13; docs/perf/attention.md, v5 and v6). STAGES = 4 and the transposed-V
-- variant (1.6x the time) left the space after session 12; RETIRE = 0 (P·V left in flight across
-- the next tile, which ptxas serializes, C7515) after session 13, where RETIRE = 1 won every
-- shape it was timed at (8k causal hd512 296.8 against 279.6 TFLOP/s). The template keeps
-- RETIRE = 0 for the day the in-flight form compiles unserialized. The rules, budget and launch
-- are tailor.awg_space's (spacelib.lua).

return tailor.awg_space({
  NWG = { 1, 2 },
  BN = { 32, 64 },
  STAGES = { 2, 3 },
  HP = { 1, 2, 4, 8 },
  RETIRE = { 1 },
})
