-- attention_prefill_wg_retire.lua — templates/attention_prefill_wg.cu with each tile's P·V
-- retired at the end of the tile (RETIRE = 1) instead of left in flight across the next tile's
-- loads and S. ptxas serializes the wgmmas of the in-flight form (C7515, docs/perf/attention.md
-- v5); this form compiles without that. Which is faster is the GPU's to say. Op
-- "attention_prefill"; the rules, budget and launch are tailor.awg_space's.

return tailor.awg_space({
  NWG = { 1, 2 },
  BN = { 32, 64 },
  STAGES = { 2, 3 },
  HP = { 1, 2, 4, 8 },
  RETIRE = { 1 },
}, { experimental = "written without a GPU run: P·V retired per tile is unverified" })
