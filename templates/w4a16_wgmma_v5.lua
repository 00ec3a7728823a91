-- w4a16_wgmma_v5.lua — the configurations of templates/w4a16_wgmma.cu not yet verified on a GPU
-- (op "w4a16_matmul"): ILV = 1 (each word's fragments dequantized while the previous word's
-- MMAs run), three warpgroups (192 weight rows a block) and BM = 192 (m64n192k16). Whatever
-- w4a16_wgmma.lua already plans is left to it.

return tailor.w4g_space({
  BM = { 64, 128, 192, 256 },
  BK = { 64, 128 },
  WG = { 1, 2, 3 },
  STAGES = { 3, 4, 5 },
  ILV = { 0, 1 },
}, {
  experimental = "written without a GPU: ILV = 1, WG = 3 and BM = 192 are unverified",
  only = function(p) return p.ILV == 1 or p.WG == 3 or p.BM == 192 end,
  only_why = "planned by w4a16_wgmma (ILV = 0, WG <= 2, BM != 192)",
})
