-- spacelib.lua — helpers shared by the search spaces, run before each space in the same sandbox
-- and given to it as the read-only global table `tailor` (docs/search-spaces.md). Part of every
-- space's hash: editing it re-tunes what depends on it.
local lib = {}

function lib.pow2_at_least(x)
  local p = 1
  while p < x do p = p * 2 end
  return p
end

function lib.ceil_div(a, b) return (a + b - 1) // b end

-- SMs of the device (80 when a profile does not say)
function lib.sms(device)
  if device.sm_count and device.sm_count > 0 then return device.sm_count end
  return 80
end

-- the widest of 8, 4, 2, 1 elements dividing n (vector loads of a row)
function lib.vec_dividing(n)
  for _, v in ipairs({ 8, 4, 2 }) do
    if n % v == 0 then return v end
  end
  return 1
end

-- Rules of the CUDA-core dense GEMV (templates/matmul_gemv.cu), shared by the ops it builds
-- (matmul, matmul_glu, matmul_seam). A block holds THREADS/32 warps, KWARPS of which split k for
-- the same ROWS output rows; a warp reads nr weight rows per output row (2 for a stacked
-- gate|up); MT activation rows share each weight load; UNROLL 16-byte pieces per weight row
-- and lane are in flight. weight_bytes: the whole weight (the in-flight rule applies to weights
-- big enough to be bandwidth-bound). Returns true, or false and the reason.
function lib.dense_gemv_valid(p, shape, device, purpose, nr, weight_bytes)
  local warps = p.THREADS // 32
  if shape.m > 16 then
    return false, string.format("m=%d > 16: a GEMV would be bound by its fp32 FMAs", shape.m)
  end
  if shape.k % 8 ~= 0 then
    return false, string.format("k=%d is not a multiple of 8", shape.k)
  end
  -- one m tile covering m, or half of it (two blocks share the weight through L2); pruning only
  local mt = math.min(8, lib.pow2_at_least(shape.m))
  if purpose ~= "launch" and p.MT ~= mt and p.MT * 2 ~= mt then
    return false, string.format("MT=%d does not fit m=%d (use %d or %d)", p.MT, shape.m, mt,
                                mt // 2)
  end
  if p.MT * nr * p.ROWS > 16 then
    return false, string.format("MT*%d rows=%d > 16 accumulators", nr * p.ROWS,
                                p.MT * nr * p.ROWS)
  end
  if p.UNROLL * nr * p.ROWS > 8 then
    return false, string.format("UNROLL*%d rows=%d > 8 pieces in flight per lane (registers)",
                                nr * p.ROWS, p.UNROLL * nr * p.ROWS)
  end
  if p.KWARPS > warps then
    return false, string.format("KWARPS=%d > %d warps", p.KWARPS, warps)
  end
  -- every lane gets at least one full step of UNROLL pieces (beyond the simplest configuration)
  local pieces = shape.k // 8
  if (p.KWARPS > 1 or p.UNROLL > 1) and 32 * p.KWARPS * p.UNROLL > pieces then
    return false, string.format("KWARPS*UNROLL=%d leaves lanes idle for k=%d (%d pieces of 8)",
                                p.KWARPS * p.UNROLL, shape.k, pieces)
  end
  local rpb = (warps // p.KWARPS) * p.ROWS
  if rpb > shape.n and p.THREADS > 128 then
    return false, string.format("%d rows per block > n=%d", rpb, shape.n)
  end
  -- loads in flight: on weights of 128 KiB per SM and more, at least 32 warps' worth of one
  -- 16-byte load per lane, per SM
  local warps_total = lib.ceil_div(shape.n, rpb) * lib.ceil_div(shape.m, p.MT) * warps
  local in_flight = warps_total * nr * p.ROWS * p.UNROLL
  local need = 32 * lib.sms(device)
  if weight_bytes >= 131072 * lib.sms(device) and in_flight < need then
    return false, string.format("%d warps x %d pieces = %d loads in flight < %d (32 per SM)",
                                warps_total, nr * p.ROWS * p.UNROLL, in_flight, need)
  end
  return true
end

-- What the W4A16 kernel layout (runtime/w4a16.h) needs of a shape: 32 | group | k. Returns
-- true, or false and the sentence.
function lib.w4_layout_ok(shape)
  if shape.k % 32 ~= 0 or shape.group % 32 ~= 0 or shape.k % shape.group ~= 0 then
    return false, string.format("k=%d, group=%d: the layout needs 32 | group | k",
                                shape.k, shape.group)
  end
  return true
end

-- The layout, and a k tile of BK columns that nests with the scale groups (one divides the
-- other): the first rules of the tensor-core W4A16 templates (w4a16_mma, w4a16_wgmma).
function lib.w4_tile_ok(p, shape)
  local ok, why = lib.w4_layout_ok(shape)
  if not ok then return false, why end
  if p.BK % shape.group ~= 0 and shape.group % p.BK ~= 0 then
    return false, string.format("BK=%d and group=%d do not nest", p.BK, shape.group)
  end
  return true
end

-- The parameters of every space over the CUDA-core W4A16 GEMV (templates/w4a16_gemv.cu:
-- w4a16_gemv, w4a16_glu, w4a16_seam): THREADS, KWARPS warps splitting k, ROWS weight rows per
-- warp, MT activation rows per block.
lib.W4A16_GEMV_PARAMS = {
  THREADS = { 64, 128, 256 },
  KWARPS = { 1, 2, 4 },
  ROWS = { 1, 2, 4 },
  MT = { 1, 2, 4, 8 },
}

-- Rules of the CUDA-core W4A16 GEMV (templates/w4a16_gemv.cu), shared by w4a16_matmul and
-- w4a16_seam: a warp owns ROWS rows and a 1/KWARPS share of the 32-column chunks of k.
function lib.w4a16_gemv_valid(p, shape, purpose)
  local warps = p.THREADS // 32
  if shape.m > 8 then
    return false, string.format("m=%d > 8: a GEMV would be bound by its fp32 FMAs", shape.m)
  end
  local ok, why = lib.w4_layout_ok(shape)
  if not ok then return false, why end
  -- one m tile covering m, or half of it (two blocks share the weight through L2); pruning only
  local mt = lib.pow2_at_least(shape.m)
  if purpose ~= "launch" and p.MT ~= mt and p.MT * 2 ~= mt then
    return false, string.format("MT=%d does not fit m=%d (MT is m rounded up to a power of "
                                .. "two, %d, or half of it)", p.MT, shape.m, mt)
  end
  if p.MT * p.ROWS > 8 then
    return false, string.format("MT*ROWS=%d > 8 accumulator sets", p.MT * p.ROWS)
  end
  if p.KWARPS > warps then
    return false, string.format("KWARPS=%d > %d warps", p.KWARPS, warps)
  end
  local chunks = shape.k // 32
  if p.KWARPS > 1 and 32 * p.KWARPS > 2 * chunks then
    return false, string.format("KWARPS=%d leaves most lanes idle for k=%d (%d chunks)",
                                p.KWARPS, shape.k, chunks)
  end
  local rows_per_block = (warps // p.KWARPS) * p.ROWS
  if rows_per_block > shape.n and p.THREADS > 64 then
    return false, string.format("%d rows per block > n=%d", rows_per_block, shape.n)
  end
  return true
end

-- The layer seam run by a GEMV's last block (templates/include/seam.cuh) holds its n-wide row in
-- registers: with THREADS threads and vec_dividing(n) elements per load, at most 32 values of
-- each of a and x per thread.
function lib.seam_fits(p, n)
  local vec = lib.vec_dividing(n)
  local held = lib.ceil_div(n // vec, p.THREADS) * vec
  if held > 32 then
    return false, string.format("the seam holds %d values of the %d-wide row per thread with "
                                .. "THREADS=%d (more than 32)", held, n, p.THREADS)
  end
  return true
end

-- The defines of the seam epilogue for an n-wide row and seam mode.
function lib.seam_defines(n, mode)
  return { SEAM = 1, SEAM_COLS = n, SEAM_MODE = mode, SEAM_VEC = lib.vec_dividing(n) }
end

-- The seam prologue before a one-row GEMV (matmul_pro, w4a16_pro: PRO in the GEMV templates):
-- its defines for a k-wide row and seam mode; its shared memory (the row, 2 bytes a value, and
-- block_sum's scratch, a float per warp); its arguments after the GEMV's own, in the templates'
-- order, appended to the list `a`.
function lib.pro_defines(k, mode)
  return { PRO = 1, PRO_COLS = k, PRO_MODE = mode, PRO_VEC = lib.vec_dividing(k) }
end

function lib.pro_smem(p, k) return 2 * k + 4 * (p.THREADS // 32) end

-- The seams' norm weights (and the layer scalar) requested with cp.async before the grid wait,
-- so that the block reaches the wait at once and the weights land while the predecessor ends:
-- 1 from sm_80 when the block has a barrier to publish them (THREADS > 32) and the row is whole
-- 16-byte pieces, else 0 (plain loads: residual_norm stages them before the wait all the same,
-- matmul_pro reads them after its reductions). Measured on the H200 in session 18
-- (docs/perf/model.md): W4A16 decode +2.5 %, bf16 +0.8 %, every survivor verified.
function lib.seam_async(p, cols, device)
  if device.sm >= 80 and p.THREADS > 32 and cols % 8 == 0 then return 1 end
  return 0
end

-- What a seam kernel needs: bf16 where the dtype is, cp.async where it stages asynchronously.
function lib.seam_requires(dtype, async)
  local r = lib.dtype_requires(dtype)
  if async == 1 then r[#r + 1] = "cp.async" end
  return r
end

-- matmul_pro's staged weights: w_post's and w_next's k values, then 16 bytes for the scalar.
function lib.pro_stage_smem(k, async) return async == 1 and 4 * k + 16 or 0 end

-- The arguments of a seam before the product (PRO: seam.cuh's SEAM_BEFORE_PARAMS) and of one
-- after it (SEAM: SEAM_AFTER_PARAMS), appended to a; eps last.
function lib.pro_args(a)
  for _, name in ipairs({ "t", "x_in", "x_out", "y", "w_post", "w_next", "scalar" }) do
    a[#a + 1] = name
  end
  a[#a + 1] = { f32 = 1e-6 }
  return a
end

function lib.seam_args(a)
  for _, name in ipairs({ "y", "x", "w_post", "w_next", "scalar", "counters" }) do
    a[#a + 1] = name
  end
  a[#a + 1] = { f32 = 1e-6 }
  return a
end

-- ---- the tensor-core GEMMs (templates/matmul_mma.cu, templates/w4a16_mma.cu) ----

-- Block tiles of BM x BN over the output.
function lib.mma_tiles(p, shape) return lib.ceil_div(shape.m, p.BM) * lib.ceil_div(shape.n, p.BN) end

-- Pipeline depth: copies are synchronous below sm_80, so 2 stages; from sm_80 3 or 4, or 2 where
-- k is short (ktiles: k tiles per block).
function lib.mma_stages_valid(p, device, ktiles)
  if device.sm < 80 then
    if p.STAGES ~= 2 then
      return false, string.format("STAGES=%d: sm_%d has no cp.async", p.STAGES, device.sm)
    end
  elseif p.STAGES == 2 and ktiles > 2 then
    return false, string.format("STAGES=2 with %d k tiles per block (3 or 4 pipeline better)",
                                ktiles)
  elseif p.STAGES > 2 and ktiles < p.STAGES then
    return false, string.format("STAGES=%d > %d k tiles per block", p.STAGES, ktiles)
  end
  return true
end

-- The instructions of the mma templates: m16n8k16 with cp.async from sm_80, m16n8k8 below.
function lib.mma_requires(dtype, device)
  local r
  if device.sm >= 80 then
    r = { "ldmatrix", "mma.m16n8k16", "cp.async" }
  else
    r = { "ldmatrix", "mma.m16n8k8" }
  end
  if dtype == "bf16" then r[#r + 1] = "bf16" end
  return r
end

-- Split-k's workspace: fp32 partials [SPLITK, m, n] and one counter per tile; the kernels leave
-- both reusable (partials are overwritten before they are read, counters reset by the last block).
function lib.splitk_workspace(p, shape, tiles)
  if p.SPLITK == 1 or (p.CSPLIT or 0) == 1 then return {} end -- CSPLIT: a cluster's sum
  return { partial = 4 * p.SPLITK * shape.m * shape.n,
           counters = 4 * (tiles or lib.mma_tiles(p, shape)) }
end

-- The arguments of every w4a16_matmul template (w4a16_mma.cu, w4a16_gemv_wide.cu,
-- w4a16_gemv_t.cu): buffers, split-k buffers when SPLITK > 1, m, n, k and the scales' row stride.
function lib.w4a16_args(p, shape)
  local a = { "out", "a", "qweight", "scales" }
  if shape.zp ~= 0 then a[#a + 1] = "zeros" end
  if p.SPLITK > 1 and (p.CSPLIT or 0) == 0 then
    a[#a + 1] = "partial"
    a[#a + 1] = "counters"
  end
  a[#a + 1] = { i32 = "m" }
  a[#a + 1] = { i32 = "n" }
  a[#a + 1] = { i32 = "k" }
  a[#a + 1] = { i32 = lib.w4_scale_ld(shape) }
  return a
end

-- ---- attention (templates/attention_*.cu) ----

-- Whether the device is roomy: 100 KB or more of opt-in shared memory per block (sm_80+ class).
function lib.roomy(device) return device.smem_optin >= 100000 end

-- Whether a space offers its larger tiles at a shape: the card is roomy and its opt-in budget
-- per block holds `bytes`, the space's smallest large-tile block at that shape. A 99 KB card
-- (sm_86, sm_89) is roomy at head_dim 256 but not at 512, where the large attention tiles need
-- 103-152 KB: there it gets the small tiles, which a 64 KB T4 runs at 512.
function lib.roomy_at(device, bytes) return lib.roomy(device) and bytes <= device.smem_optin end

-- Query heads per KV head.
function lib.attn_group(shape) return shape.heads // shape.kv_heads end

-- The geometry every attention kernel needs: head_dim 256 or 512, heads a multiple of kv_heads;
-- decode also a positive batch and kv_len, and prep 0 or 1.
function lib.attn_shape_valid(shape, decode)
  local d = shape.head_dim
  if d ~= 256 and d ~= 512 then
    return false, string.format("head_dim=%d is not 256 or 512", d)
  end
  if shape.kv_heads < 1 or shape.heads % shape.kv_heads ~= 0 then
    return false, string.format("heads=%d is not a multiple of kv_heads=%d", shape.heads,
                                shape.kv_heads)
  end
  if decode and (shape.batch < 1 or shape.kv_len < 1) then
    return false, "batch and kv_len must be positive"
  end
  if decode and shape.prep ~= 0 and shape.prep ~= 1 then
    return false, string.format("prep=%d is not 0 or 1", shape.prep)
  end
  return true
end

-- Decode's cache slots: a sliding layer's ring holds `window` slots, a full layer's cache kv_len.
function lib.attn_slots(shape) return shape.window > 0 and shape.window or shape.kv_len end

-- Decode's split: slots per block for a target of `target` blocks (a multiple of the stream's
-- granularity `gran`), and the block count that gives.
function lib.attn_chunk(target, gran, shape)
  local per = (lib.attn_slots(shape) + target - 1) // target
  return ((per + gran - 1) // gran) * gran
end
function lib.attn_nsplit(target, gran, shape)
  return (lib.attn_slots(shape) + lib.attn_chunk(target, gran, shape) - 1)
         // lib.attn_chunk(target, gran, shape)
end

-- Decode's stages (pruning only): a block streams at least one stage; more than 2 stages where
-- a block's `slots` fill fewer hold shared memory that is never used, and under PDL a block that
-- large keeps the kernels around it off its SM (docs/perf/attention.md, session 21). The reason,
-- or nil.
function lib.attn_unfilled_stages(stages, slots, keys_per_stage)
  local used = (slots + keys_per_stage - 1) // keys_per_stage
  if stages > 2 and used < stages then
    return string.format("STAGES=%d but a block streams only %d stage(s) of keys", stages, used)
  end
  return nil
end

-- Candidate split targets: one block per (sequence, KV head), 8, and about 1/2, 1 and 2 waves
-- (at most one block per 16 slots, at most 256).
function lib.attn_split_targets(shape, device)
  local pairs = shape.batch * shape.kv_heads
  local cap = math.max(1, math.min(256, (lib.attn_slots(shape) + 15) // 16))
  local seen, list = {}, {}
  local sm = math.max(device.sm_count, 1)
  for _, t in ipairs({ 1, 8, (sm + 2 * pairs - 1) // (2 * pairs), (sm + pairs - 1) // pairs,
                       (2 * sm + pairs - 1) // pairs }) do
    t = math.max(1, math.min(cap, t))
    if not seen[t] then seen[t] = true; list[#list + 1] = t end
  end
  table.sort(list)
  return list
end

-- Why a decode merge in which every block waits for the others cannot run (nil when it can):
-- `what` (e.g. "FLAT=1") with n blocks for each of `pairs` (sequence, KV head) pairs needs the
-- whole grid resident at once, counted as one wave of a block an SM.
function lib.attn_one_wave(what, pairs, n, device)
  if pairs * n <= lib.sms(device) then return nil end
  return string.format("%s: %d pairs x %d blocks exceed one wave of %d SMs (every block waits "
                       .. "for the others)", what, pairs, n, lib.sms(device))
end

-- Why SPLITS is a repeat: a smaller target giving the same block count (nil when it is not).
function lib.attn_split_repeat(p, gran, shape, device)
  local n = lib.attn_nsplit(p.SPLITS, gran, shape)
  for _, t in ipairs(lib.attn_split_targets(shape, device)) do
    if t < p.SPLITS and lib.attn_nsplit(t, gran, shape) == n then
      return string.format("SPLITS=%d gives the same %d blocks as SPLITS=%d", p.SPLITS, n, t)
    end
  end
  return nil
end

-- Decode with prep = 1 (q arrives raw; attn_prep_q in attn_mma.cuh): the arguments it appends
-- to a decode kernel's (q_w, inv_freq, eps; eps is Gemma 4's 1e-6 as in qk_norm_rope.lua).
function lib.attn_prep_args(shape, args)
  if shape.prep == 1 then
    args[#args + 1] = "q_w"
    args[#args + 1] = "inv_freq"
    args[#args + 1] = { f32 = 1e-6 }
  end
  return args
end

-- Decode's merge tree over n split partials (attention_decode_wide.cu, attention_decode_wg.cu):
-- the fan-in, the smallest F >= 2 with F * F >= n (two levels at most), and the stored nodes
-- (levels with more than one node) and arrival counters (levels >= 1) it needs.
function lib.attn_tree_fan(n)
  local f = 2
  while f * f < n do f = f + 1 end
  return f
end
function lib.attn_tree_sizes(n, f)
  local nodes, cnts = 0, 0
  while n > 1 do
    nodes = nodes + n
    n = (n + f - 1) // f
    cnts = cnts + n
  end
  return nodes, cnts
end

-- The instructions of attn_mma.cuh: ldmatrix, the mma of MMA_K, cp.async when ASYNC.
function lib.attn_requires(p, dtype)
  local r = { "ldmatrix", p.MMA_K == 16 and "mma.m16n8k16" or "mma.m16n8k8" }
  if p.ASYNC == 1 then r[#r + 1] = "cp.async" end
  if dtype == "bf16" then r[#r + 1] = "bf16" end
  return r
end

-- ---- attention_prefill.cu's spaces (attention_prefill.lua: rm = 1; attention_prefill_tall.lua:
-- rm = 2 row tiles of 16 per warp) ----

-- The mma step: m16n8k16 from sm_80, two m16n8k8 below.
function lib.attn_mma_k(device) return device.sm >= 80 and 16 or 8 end

-- Bytes of dynamic shared memory, exactly the layout the kernel carves (2-byte elements for both
-- dtypes; rows padded by 8 elements): sMax, sQ (unless Q_REGS), sK and sV per stage, sP (only
-- with WN > 1: a lone warp per row group keeps P in registers). A block has 16 rm WM rows.
function lib.attn_prefill_smem(p, shape, rm)
  local bm, kstr, pstr = 16 * rm * p.WM, shape.head_dim + 8, p.BN + 8
  local q = (p.Q_REGS == 1) and 0 or bm * kstr
  local pt = (p.WN > 1) and bm * pstr or 0
  return 4 * p.WN * bm + 2 * (q + 2 * p.STAGES * p.BN * kstr + pt)
end

-- 32-bit registers a thread needs for its fragments: output accumulators, Q (when kept in
-- registers) and scores. The compiler adds ~90 for addresses, softmax state and loop values.
local function attn_prefill_regs(p, shape, rm)
  local d = shape.head_dim
  local o, q, s = rm * d // (2 * p.WN), (p.Q_REGS == 1) and d // 4 or 0, rm * p.BN // (2 * p.WN)
  return o + q + s, o, q, s
end

-- Whether the prefill spaces offer their larger tiles at this shape: the smallest of them (32
-- rows, 2 warps per row group, 32-key tiles, one stage; one warp per row group would spill at
-- head_dim 512) fits the card.
function lib.attn_prefill_roomy(device, shape)
  return lib.roomy_at(device, lib.attn_prefill_smem({ WM = 2, WN = 2, BN = 32, STAGES = 1,
                                                      Q_REGS = 0 }, shape, 1))
end

-- The rules of every attention_prefill space: the shape, keys per warp, warps, registers,
-- stages, and (pruning only) blocks taller than the chunk.
function lib.attn_prefill_valid(p, shape, device, purpose, rm)
  local ok, why = lib.attn_shape_valid(shape, false)
  if not ok then return false, why end
  if shape.q_len < 1 or shape.q_len > shape.kv_len then
    return false, string.format("q_len=%d must be in 1..kv_len=%d", shape.q_len, shape.kv_len)
  end
  local ns = p.BN // p.WN
  if ns ~= 8 and ns % 16 ~= 0 then
    return false, string.format("BN/WN=%d keys per warp is neither 8 nor a multiple of 16", ns)
  end
  if p.WM * p.WN > 8 then
    return false, string.format("WM*WN=%d warps: more than 8", p.WM * p.WN)
  end
  local regs, o, q, s = attn_prefill_regs(p, shape, rm)
  if regs > 160 then
    return false, string.format("fragments need %d registers per thread (O %d + Q %d + S %d) "
                                .. "> 160: would spill", regs, o, q, s)
  end
  -- pruning only (a winner of the prefill chunk runs shorter chunks)
  local bm = 16 * rm * p.WM
  if purpose ~= "launch" and p.WM > (lib.attn_prefill_roomy(device, shape) and 2 or 1)
     and bm > 2 * shape.q_len then
    return false, string.format("BM=%d rows for q_len=%d leaves most rows idle", bm, shape.q_len)
  end
  if p.STAGES > 1 and p.ASYNC == 0 then
    return false, "STAGES>1 needs cp.async"
  end
  return true
end

-- ---- the CUDA-core GEMVs (matmul_gemv.cu, w4a16_gemv.cu) and their seam epilogue ----

-- The row stride of a W4A16 weight's scales and zeros (runtime/w4a16.h): n rounded up to 16, or
-- the shape's s_ld for one part of matrices stacked along n.
function lib.w4_scale_ld(shape)
  if shape.s_ld and shape.s_ld > 0 then return shape.s_ld end
  return (shape.n + 15) // 16 * 16
end

-- Arguments of the gated int4 GEMVs (op w4a16_glu): the stack of 2n rows' scale stride is s_ld,
-- or 2n rounded up to 16.
function lib.w4a16_glu_args(shape)
  local a = { "out", "a", "qweight", "scales" }
  if shape.zp ~= 0 then a[#a + 1] = "zeros" end
  a[#a + 1] = { i32 = "m" }
  a[#a + 1] = { i32 = "n" }
  a[#a + 1] = { i32 = "k" }
  local ld = shape.s_ld > 0 and shape.s_ld or (2 * shape.n + 15) // 16 * 16
  a[#a + 1] = { i32 = ld }
  return a
end

-- The split-k counts a decode template keeps: `usable(s)` says whether split s gives useful
-- slices and `warps(s)` how many warps the launch then has; kept are the smallest usable split
-- reaching `want` warps, the one before and the one after it (where none reaches it, the two
-- largest usable ones). Returns a set {split = true}.
function lib.split_neighbours(splits, usable, warps, want)
  local ok, first = {}, nil
  for _, s in ipairs(splits) do
    if usable(s) then ok[#ok + 1] = s end
  end
  for i, s in ipairs(ok) do
    if warps(s) >= want then first = i; break end
  end
  if not first then first = #ok end
  local kept = {}
  for i = first - 1, first + 1 do
    if ok[i] then kept[ok[i]] = true end
  end
  return kept
end

-- Only the dtype's own feature: bf16 needs sm_80.
function lib.dtype_requires(dtype)
  if dtype == "bf16" then return { "bf16" } end
  return {}
end

-- A space's `requires` when its only need is its dtype's: `requires = tailor.requires_dtype`.
function lib.requires_dtype(p, shape, dtype, device) return lib.dtype_requires(dtype) end

-- block_sum's scratch (tailor_common.cuh): one float per warp; a single warp reduces with
-- shuffles alone, and the compiler then drops the array.
function lib.block_sum_smem(p)
  if p.THREADS <= 32 then return 0 end
  return 4 * (p.THREADS // 32)
end

-- A row of `cols` values (shape key `key`) read VEC at a time by a block of THREADS: VEC must
-- divide it, and a block holding more than twice the row in one pass leaves most of its threads
-- idle (blocks of at most `small` threads are kept all the same).
function lib.row_vec_valid(p, cols, key, small)
  if cols % p.VEC ~= 0 then
    return false, string.format("%s=%d is not a multiple of VEC=%d", key, cols, p.VEC)
  end
  if p.THREADS * p.VEC > 2 * cols and p.THREADS > small then
    return false, string.format("THREADS*VEC=%d leaves most threads idle for %s=%d",
                                p.THREADS * p.VEC, key, cols)
  end
  return true
end

-- Output rows per block: THREADS/32/KWARPS row groups of ROWS rows.
function lib.gemv_rows_per_block(p) return (p.THREADS // 32 // p.KWARPS) * p.ROWS end

-- Blocks over n (rows per block) and m (MT activation rows per block).
function lib.gemv_grid(p, shape)
  return { lib.ceil_div(shape.n, lib.gemv_rows_per_block(p)), lib.ceil_div(shape.m, p.MT), 1 }
end

-- Static shared memory of a GEMV: red[warps * MT * nr * ROWS] floats when warps split k (nr
-- weight rows per output row: 2 for a stacked gate|up), and with the seam epilogue its
-- scratch[warps] and its ticket (an int).
function lib.gemv_smem_static(p, nr, seam)
  local warps = p.THREADS // 32
  local red = p.KWARPS > 1 and 4 * warps * p.MT * nr * p.ROWS or 0
  if seam then return red + 4 * warps + 4 end
  return red
end

-- The seam epilogue's workspace: one ticket counter per row group, zeroed once and put back to
-- zero by the last block.
function lib.seam_workspace(p, shape)
  return { counters = 4 * lib.ceil_div(shape.m, p.MT) }
end

-- ---- the transposed tensor-core int4 GEMV (templates/w4a16_gemv_t.cu) ----

lib.W4T_SPLITS = { 1, 2, 3, 4, 6, 8, 12, 16 }

-- w4a16_gemv_t.lua's parameters with `changes` applied: what a variant space over the same
-- kernel (w4a16_gemv_t_ring.lua, w4a16_gemv_t_fold.lua) lists as its own.
function lib.w4t_params(changes)
  local p = {
    WR = { 1, 2, 4 },
    WK = { 1, 2, 4 },
    RT = { 1, 2 },
    UNROLL = { 1, 2, 3 },
    SPLITK = lib.W4T_SPLITS,
    MT = { 1, 2 },
    ASMEM = { 0, 1 },
    TRIM = { 0, 1 },
    -- 1: a column tile's SPLITK blocks sum their shares in a thread block cluster (sm_90)
    CSPLIT = function(shape, dtype, device) return device.sm >= 90 and { 0, 1 } or { 0 } end,
  }
  for k, v in pairs(changes or {}) do p[k] = v end
  return p
end

-- w4a16_glu_t.lua's parameters (the gated GEMV: a gate and an up tile per warp, no split-k)
-- with `changes` applied: what its variant spaces list as their own.
function lib.w4t_glu_params(changes)
  local p = {
    WR = { 1, 2, 4 },
    WK = { 1, 2, 4 },
    RT = { 2 },
    UNROLL = { 2 },
    SPLITK = { 1 },
    MT = { 1, 2 },
    ASMEM = { 0, 1 },
    TRIM = { 0, 1 },
  }
  for k, v in pairs(changes or {}) do p[k] = v end
  return p
end

-- Weight rows per block, and outputs per block (GLU: a gate and an up tile per warp).
function lib.w4t_block_rows(p) return p.WR * p.RT * 16 end
function lib.w4t_block_outputs(p, glu) return glu and p.WR * 16 or lib.w4t_block_rows(p) end

-- Quads (128 columns) per row, per block slice, per warp.
function lib.w4t_quads(p, shape, splitk)
  local qt = lib.ceil_div(shape.k // 32, 4)
  local qps = lib.ceil_div(qt, splitk)
  return qt, qps, lib.ceil_div(qps, p.WK)
end

-- ASMEM = 1: the block's activation slice, m rows of its quads' columns plus 16 of padding
-- (the rows' pieces swizzled: w4a16_gemv_t.cu, w4t::swz).
lib.W4T_ASMEM_MAX = 64 * 1024
-- FOLD = 1 adds the staged quads' column sums after them: float[qps][8 MT].
function lib.w4t_asmem_bytes(p, shape)
  if p.ASMEM == 0 then return 0 end
  local _, qps = lib.w4t_quads(p, shape, p.SPLITK)
  local sums = (p.FOLD or 0) == 1 and 4 * qps * 8 * p.MT or 0
  return 2 * shape.m * (128 * qps + 16) + sums
end

-- RING >= 2: each warp's ring of RING batches in shared memory, after the activations: per slot
-- the weights (UNROLL x RT x 2 rows x 32 lanes x 16 bytes), 16 scales and (zp) 16 zero points
-- a (quad, row tile).
function lib.w4t_ring_bytes(p, shape)
  local ring = p.RING or 0
  if ring == 0 then return 0 end
  local ut = p.UNROLL * p.RT
  local slot = ut * 2 * 32 * 16 + ut * 16 * 2 + (shape.zp ~= 0 and ut * 16 or 0)
  return p.WR * p.WK * ring * slot
end

function lib.w4t_warps_total(p, shape, splitk, glu)
  return lib.ceil_div(shape.n, lib.w4t_block_outputs(p, glu)) * splitk * p.WR * p.WK
end

-- Does SPLITK=s give every block and every k warp quads, and the warps full batches?
function lib.w4t_split_ok(p, shape, s)
  local qt, qps, qpw = lib.w4t_quads(p, shape, s)
  if (s - 1) * qps >= qt then return false, "empty slices" end
  if (p.WK - 1) * qpw >= qps then return false, string.format("WK=%d: idle k warps", p.WK) end
  if p.UNROLL > qpw then return false, string.format("%d quads per warp", qpw) end
  local padded = lib.ceil_div(qpw, p.UNROLL) * p.UNROLL
  if 4 * (padded - qpw) > padded then return false, "more than 25% of a batch wasted" end
  return true
end

-- Whether the tensor-core GEMV (w4a16_gemv_t) plans (op, shape): its shape rules, the first of
-- w4t_valid's (at every such shape some tiling and split of it survives: test_space checks odd
-- ones). For a rule that leaves a decode shape to the GEMVs.
function lib.w4t_covers(shape)
  return shape.m <= 16 and (lib.w4_layout_ok(shape))
end

-- Rules of the transposed tensor-core int4 GEMV (templates/w4a16_gemv_t.cu) for w4a16_matmul
-- and (glu: a gate|up stack of 2n rows, n outputs) w4a16_glu.
function lib.w4t_valid(p, shape, device, purpose, glu)
  if shape.m > 16 then
    return false, string.format("m=%d > 16: decode template (two n8 tiles at most)", shape.m)
  end
  local lay_ok, lay_why = lib.w4_layout_ok(shape)
  if not lay_ok then return false, lay_why end
  -- MT n8 tiles hold the activation rows: at least m of them (correctness), exactly the
  -- fewest when choosing
  local mt = lib.ceil_div(shape.m, 8)
  if shape.m > 8 * p.MT or (purpose ~= "launch" and p.MT ~= mt) then
    return false, string.format("MT=%d n8 tiles for m=%d (%d needed)", p.MT, shape.m, mt)
  end
  -- four warps a block: the k split inside a block (WK) against the one across blocks
  -- (SPLITK) is what varies
  if p.WR * p.WK ~= 4 then
    return false, string.format("WR x WK = %d warps (4)", p.WR * p.WK)
  end
  -- loads per lane and batch 2 x RT x UNROLL (x 4 weight registers, two batches live):
  -- 4, 6 or 8; RT = 2 only with UNROLL = 2 (the activations shared by the row tiles)
  -- (UNROLL = 4 measured slower than 2 everywhere on the H200, session 7: more registers,
  -- fewer blocks resident; UNROLL = 3 is a k = 1536 warp's three quads in one batch, 0.5 µs
  -- faster than two batches of two there, session 9)
  local per = p.RT * p.UNROLL
  if per < 2 or (p.RT == 2 and p.UNROLL ~= 2) then
    return false, string.format("RT=%d UNROLL=%d: %d loads per lane and batch (4, 6 or 8; "
                                .. "RT=2 with UNROLL=2)", p.RT, p.UNROLL, 2 * per)
  end
  if p.UNROLL == 3 and p.MT > 1 then
    return false, "UNROLL=3 with MT=2: three quads of two n8 tiles of activations spill"
  end
  local bn = lib.w4t_block_outputs(p, glu)
  if bn > math.max(16, lib.pow2_at_least(shape.n)) then
    return false, string.format("%d rows per block for n=%d", bn, shape.n)
  end
  local ok, why = lib.w4t_split_ok(p, shape, p.SPLITK)
  if not ok then
    return false, string.format("SPLITK=%d WK=%d UNROLL=%d: %s", p.SPLITK, p.WK, p.UNROLL, why)
  end
  -- CSPLIT = 1 sums the split blocks' shares in a thread block cluster (sm_90): a portable one
  if (p.CSPLIT or 0) == 1 and (p.SPLITK < 2 or p.SPLITK > 8) then
    return false, string.format("CSPLIT=1: SPLITK=%d blocks are not a portable cluster (2 to 8)",
                                p.SPLITK)
  end
  -- TRIM = 1 shortens a warp's last, partial batch to its quads: only where a warp has more
  -- quads than one batch and they are not a whole number of batches
  if (p.TRIM or 0) == 1 then
    local _, _, qpw = lib.w4t_quads(p, shape, p.SPLITK)
    if qpw <= p.UNROLL or qpw % p.UNROLL == 0 then
      return false, string.format("TRIM=1: %d quads per warp in batches of %d (nothing to trim)",
                                  qpw, p.UNROLL)
    end
  end
  if (p.FOLD or 0) == 1 then
    if p.ASMEM ~= 1 then
      return false, "FOLD=1 with ASMEM=0: the quads' sums come from the staged activations"
    end
    if shape.group % 128 ~= 0 then
      return false, string.format("FOLD=1 with group=%d: the bias comes off a quad's sum (group "
                                  .. "a multiple of 128)", shape.group)
    end
    if (p.RING or 0) ~= 0 then return false, "FOLD=1 with RING: not written" end
  end
  if (p.MAGREG or 0) == 1 and shape.group % 128 ~= 0 then
    return false, string.format("MAGREG=1 with group=%d: the prescaled pairs (groups under a quad) "
                                .. "are w4a16_common's", shape.group)
  end
  if (p.CLAMP or 0) == 1 then
    if (p.FOLD or 0) == 1 then
      return false, "CLAMP=1 with FOLD=1: FOLD needs a slot past the warp's quads to have scale 0"
    end
    if (p.RING or 0) ~= 0 then return false, "CLAMP=1 with RING: the ring's loads are cp.async" end
  end
  if (p.L2PF or 0) == 1 then
    if device.sm < 80 then
      return false, string.format("L2PF=1 on sm_%d: written for sm_80 and later (untried on "
                                  .. "the T4)", device.sm)
    end
    if (p.RING or 0) ~= 0 then return false, "L2PF=1 with RING: the ring's loads are cp.async" end
  end
  local ring = p.RING or 0
  if ring ~= 0 then
    if ring < 2 then return false, string.format("RING=%d: a ring takes 2 slots or more", ring) end
    if (p.TRIM or 0) == 1 then
      return false, string.format("RING=%d with TRIM=1: trimming is the register path's", ring)
    end
    if shape.group % 128 ~= 0 then
      return false, string.format("RING=%d with group=%d: the ring holds one scale a quad "
                                  .. "(group a multiple of 128)", ring, shape.group)
    end
    if glu and shape.n % 8 ~= 0 then
      return false, string.format("RING=%d, n=%d: the up rows' scales are copied 16 bytes at "
                                  .. "a time from row n (n a multiple of 8)", ring, shape.n)
    end
  end
  local sa = lib.w4t_asmem_bytes(p, shape)
  if sa > lib.W4T_ASMEM_MAX then
    return false, string.format("ASMEM=1: %d B of activations per block (at most %d)", sa,
                                lib.W4T_ASMEM_MAX)
  end
  local want, n_sm = 8 * lib.sms(device), lib.sms(device)
  local kept = lib.split_neighbours(lib.W4T_SPLITS,
    function(s) return (lib.w4t_split_ok(p, shape, s)) end,
    function(s) return lib.w4t_warps_total(p, shape, s, glu) end, want)
  -- no split won every E2B shape it could run
  kept[1] = kept[1] or (lib.w4t_split_ok(p, shape, 1))
  if not kept[p.SPLITK] then
    return false, string.format("SPLITK=%d: %d warps for %d SMs (kept: 1 and the splits "
                                .. "around the smallest reaching %d warps)",
                                p.SPLITK, lib.w4t_warps_total(p, shape, p.SPLITK, glu), n_sm,
                                want)
  end
  return true
end

-- PRESCALE: groups of 32 or 64 columns put several groups in one mma, so the weights are
-- scaled before it; whole quads per group keep them unscaled (a quad's sum times its scale).
-- MAGREG (magreg: spaces built with opts.magreg, w4a16_gemv_t_magreg.lua and
-- w4a16_glu_t_magreg.lua): the unscaled pairs (PRESCALE 0) take their mask and MAGIC in one LOP3.
-- Under __launch_bounds__(threads, 1) (MINB 1: at ptxas's own register target the register
-- holding MAGIC spilled in some kernels) but at MT = 2 on sm_90, where none spills without it
-- and MINB 1 would cost a block an SM (140 → 190 registers at m = 16); on the T4 MT = 2 spills
-- without it. Session 51 (H100): 3-8 % faster than the two-LOP3 form at every m = 1 shape
-- timed, the launch bounds alone no faster; the default once its GPU tests have run. A space
-- that lists MAGREG or MINB (the FOLD variant) sets them itself.
function lib.w4t_defines(shape, glu, p, magreg, device)
  local d = { GROUP = shape.group, HAS_ZP = shape.zp, PRESCALE = shape.group % 128 ~= 0 and 1 or 0 }
  -- (defined only where 1: the prescaled kernels keep their names and code)
  if magreg and p.MAGREG == nil and d.PRESCALE == 0 then d.MAGREG = 1 end
  if p.MINB == nil and (p.MAGREG or d.MAGREG) == 1 and (p.MT == 1 or device.sm < 90) then
    d.MINB = 1
  end
  if glu then d.GLU = 1 end
  return d
end

function lib.w4t_requires(p, dtype, device)
  local r
  if device.sm >= 80 then r = { "mma.m16n8k16" } else r = { "mma.m16n8k8" } end
  if dtype == "bf16" then r[#r + 1] = "bf16" end
  if (p.CSPLIT or 0) == 1 then r[#r + 1] = "cluster" end
  if (p.RING or 0) ~= 0 then r[#r + 1] = "cp.async" end
  return r
end

-- The k warps' sums: float red[WK * MT * 8 * block rows].
function lib.w4t_smem_static(p) return 4 * p.WK * p.MT * 8 * lib.w4t_block_rows(p) end

function lib.w4t_grid(p, shape, glu)
  return { lib.ceil_div(shape.n, lib.w4t_block_outputs(p, glu)), p.SPLITK, 1 }
end

-- The space of w4a16_gemv_t.cu over `params`: op w4a16_matmul, or with glu the gated
-- w4a16_glu (a warp's two row tiles are 16 gate rows and their 16 up rows; no split-k: the
-- gating needs both whole sums in one block). A builder, so that a variant space is its params
-- (session 42's PERSIST variants were two such files; docs/perf/w4a16.md); opts.experimental
-- (optional) is the sentence that keeps it out of the default space; opts.magreg sets MAGREG
-- where the pairs are unscaled (w4t_defines); opts.ring_only refuses
-- RING = 0 (a space of the ring alone, beside w4a16_gemv_t's register path).
function lib.w4t_space(params, glu, opts)
  opts = opts or {}
  local space = {
    op = glu and "w4a16_glu" or "w4a16_matmul",
    source = "w4a16_gemv_t.cu",
    experimental = opts.experimental,
    dtypes = { "fp16", "bf16" },
    params = params,
    defines = function(p, shape, dtype, device)
      return lib.w4t_defines(shape, glu, p, opts.magreg, device)
    end,
    valid = function(p, shape, dtype, device, purpose)
      if opts.ring_only and (p.RING or 0) == 0 then
        return false, "RING=0: the register path is w4a16_gemv_t's (this space is the ring's)"
      end
      return lib.w4t_valid(p, shape, device, purpose, glu)
    end,
    requires = function(p, shape, dtype, device) return lib.w4t_requires(p, dtype, device) end,
    threads = function(p, shape, dtype, device) return p.WR * p.WK * 32 end,
    -- __shared__ float red[WK * MT * 8 * BN]: the k warps' sums (and the split-k flag)
    smem_static = function(p, shape, dtype, device) return lib.w4t_smem_static(p) end,
    -- ASMEM = 1: T sA[m][128 qps + 16] (pieces swizzled); RING: the warps' rings after it
    smem_dynamic = function(p, shape, dtype, device)
      return lib.w4t_asmem_bytes(p, shape) + lib.w4t_ring_bytes(p, shape)
    end,
    grid = function(p, shape, dtype, device) return lib.w4t_grid(p, shape, glu) end,
  }
  if glu then
    space.args = function(p, shape, dtype, device) return lib.w4a16_glu_args(shape) end
  else
    -- fp32 partials [SPLITK, m, n] and one counter per column tile, left reusable by the kernel
    space.workspace = function(p, shape, dtype, device)
      return lib.splitk_workspace(p, shape, lib.ceil_div(shape.n, lib.w4t_block_rows(p)))
    end
    space.args = function(p, shape, dtype, device) return lib.w4a16_args(p, shape) end
  end
  return space
end

-- What every sm_90a warpgroup-MMA template needs: wgmma (code for sm_90a), cp.async, and bf16
-- support when that is the dtype.
function lib.wgmma_requires(dtype)
  local r = { "wgmma", "cp.async" }
  if dtype == "bf16" then r[#r + 1] = "bf16" end
  return r
end

-- ---- w4a16_wgmma.cu (the sm_90a prefill GEMM): the one space builder its spaces share ----

-- Bytes of one pipeline stage, rounded up to 1024 (the next stage's swizzled tile is aligned):
-- activations, weight words (BK/8 per row, padded to 4 mod 8), scales, zero points.
function lib.w4g_stage_bytes(p, shape)
  local bn, w_ld = 64 * p.WG, p.BK // 8
  if w_ld % 8 ~= 4 then w_ld = w_ld + 4 end
  local srows = 1
  if p.BK >= shape.group then srows = p.BK // shape.group end
  local z = 0
  if shape.zp ~= 0 then z = srows * bn end
  local bytes = p.BM * p.BK * 2 + bn * w_ld * 4 + srows * bn * 2 + z
  return (bytes + 1023) // 1024 * 1024
end

-- The space of w4a16_wgmma.cu over `params` (BM, BK, WG, STAGES, INFLIGHT lists, and SPLITK for
-- a decode space); opts.experimental (optional) is the sentence that keeps it out of the default
-- space; opts.decode plans the few-token shapes (m <= 32: BM = 8, 16 or 32 holds every token,
-- SPLITK splits k) instead of the prefill ones (m >= 64). A builder, so that a variant space
-- over the same kernel (a test's one-configuration copy, an experimental tile) is a few lines.
function lib.w4g_space(params, opts)
  opts = opts or {}
  local function splitk(p) return p.SPLITK or 1 end
  -- k tiles a block streams: all of them, or a split's share
  local function block_ktiles(p, shape)
    return lib.ceil_div(lib.ceil_div(shape.k, p.BK), splitk(p))
  end
  return {
    op = "w4a16_matmul",
    source = "w4a16_wgmma.cu",
    experimental = opts.experimental,
    dtypes = { "fp16", "bf16" },
    params = params,
    defines = function(p, shape, dtype, device)
      -- decode: the first stages' weights are requested before the grid wait (EARLY_W)
      return { GROUP = shape.group, HAS_ZP = shape.zp, EARLY_W = opts.decode and 1 or nil }
    end,

    valid = function(p, shape, dtype, device, purpose)
      local ok, why = lib.w4_tile_ok(p, shape)
      if not ok then return false, why end
      if shape.n % 8 ~= 0 then
        return false, string.format("n=%d: the epilogue stores 8 columns at a time (n %% 8 == 0)",
                                    shape.n)
      end
      if splitk(p) > 1 and shape.m > p.BM then
        return false, string.format("SPLITK=%d sums one token tile: m=%d > BM=%d", splitk(p),
                                    shape.m, p.BM)
      end
      local kt = lib.ceil_div(shape.k, p.BK)
      if splitk(p) > 1 and (splitk(p) - 1) * block_ktiles(p, shape) >= kt then
        return false, string.format("SPLITK=%d leaves a split without k tiles (%d tiles of BK=%d)",
                                    splitk(p), kt, p.BK)
      end
      if opts.decode then
        -- a decode template: a handful of tokens in one narrow wgmma N (pruning only)
        if purpose ~= "launch" and shape.m > 32 then
          return false, string.format("m=%d > 32: a prefill shape (w4a16_wgmma.lua)", shape.m)
        end
        if purpose ~= "launch" and p.BM > math.max(8, lib.pow2_at_least(shape.m)) then
          return false, string.format("BM=%d > m=%d rounded up", p.BM, shape.m)
        end
        if purpose ~= "launch" and p.BM < shape.m then
          return false, string.format("BM=%d < m=%d: each token tile would read the weights again",
                                      p.BM, shape.m)
        end
      else
        -- a prefill template: the tokens fill the wgmma's N (pruning only; any m runs)
        if purpose ~= "launch" and shape.m < 64 then
          return false, string.format("m=%d < 64: a decode shape (the GEMV templates)", shape.m)
        end
        if purpose ~= "launch" and p.BM > math.max(64, lib.pow2_at_least(shape.m)) then
          return false, string.format("BM=%d > m=%d rounded up", p.BM, shape.m)
        end
      end
      if 64 * p.WG > math.max(64, lib.pow2_at_least(shape.n)) then
        return false, string.format("%d weight rows per block > n=%d rounded up", 64 * p.WG, shape.n)
      end
      -- one block per SM; registers a thread as ptxas allots them on sm_90a (BM / 2 fp32
      -- accumulators, the fragments, addresses): 64 K registers in all
      -- (BM = 128 wants 172: three warpgroups of it spilled; zero points take ~4 more, which
      -- three warpgroups of BM = 192 do not have)
      local per_thread = ({ [8] = 96, [16] = 96, [32] = 104, [64] = 130, [128] = 172, [192] = 168,
                            [256] = 192 })[p.BM] + 4 * shape.zp
      if per_thread * 128 * p.WG > 65536 then
        return false, string.format("%d threads x ~%d registers (BM=%d) > 65536", 128 * p.WG,
                                    per_thread, p.BM)
      end
      local ktiles = block_ktiles(p, shape)
      if p.STAGES > ktiles then
        return false, string.format("STAGES=%d > %d k tiles%s", p.STAGES, ktiles,
                                    splitk(p) > 1 and " a split" or "")
      end
      -- the epilogue stages the output tile [BM][64 WG + 8] in the ring
      local ring, staging = p.STAGES * lib.w4g_stage_bytes(p, shape), p.BM * (64 * p.WG + 8) * 2
      if staging > ring then
        return false, string.format("the output staging (%d B) exceeds the ring (%d B)", staging, ring)
      end
      return true
    end,

    requires = function(p, shape, dtype, device) return lib.wgmma_requires(dtype) end,

    threads = function(p, shape, dtype, device) return 128 * p.WG end,
    -- split k's last-block flag: one int, which ptxas reports as 16 B (the dynamic ring after it
    -- is 16-byte aligned)
    smem_static = function(p, shape, dtype, device) return splitk(p) > 1 and 16 or 0 end,
    smem_dynamic = function(p, shape, dtype, device)
      return 1024 + p.STAGES * lib.w4g_stage_bytes(p, shape) -- + the slack that aligns the ring to 1024
    end,
    workspace = function(p, shape, dtype, device)
      return lib.splitk_workspace({ SPLITK = splitk(p) }, shape, lib.ceil_div(shape.n, 64 * p.WG))
    end,
    grid = function(p, shape, dtype, device)
      return { lib.ceil_div(shape.n, 64 * p.WG), lib.ceil_div(shape.m, p.BM), splitk(p) }
    end,

    args = function(p, shape, dtype, device)
      return lib.w4a16_args({ SPLITK = splitk(p) }, shape)
    end,

  }
end

-- Whether a warpgroup GEMM's space plans (op, shape) on an sm_90 card: its smallest
-- configuration at BK = 64 or 128 passes the space's own rules. For a rule that leaves a shape
-- to it. w4g_covers: w4a16_wgmma or w4a16_wgmma_ws (64 tokens, one warpgroup, three stages: ~40
-- KB of shared memory, within every sm_90 card's budget); w4g_ws_covers: w4a16_wgmma_ws (128
-- tokens, one consumer warpgroup and its producer).
local w4g_probe
local function w4g_plans(base, shape, dtype, device)
  w4g_probe = w4g_probe or lib.w4g_space({})
  for _, bk in ipairs({ 64, 128 }) do
    local p = { BK = bk, WG = 1, STAGES = 3 }
    for name, v in pairs(base) do p[name] = v end
    if w4g_probe.valid(p, shape, dtype, device, "tune") then return true end
  end
  return false
end

function lib.w4g_ws_covers(shape, dtype, device)
  return w4g_plans({ BM = 128, INFLIGHT = 1, WS = 1 }, shape, dtype, device)
end

function lib.w4g_covers(shape, dtype, device)
  return w4g_plans({ BM = 64, INFLIGHT = 0 }, shape, dtype, device) or
         lib.w4g_ws_covers(shape, dtype, device)
end

-- ---- attention_prefill_wg.cu: prefill attention on sm_90a warpgroup MMAs --------------------

-- Bytes of dynamic shared memory of attention_prefill_wg.cu: the 1024-byte alignment slack, Q (64
-- NWG rows), STAGES x (K, V) tiles of BN x head_dim, and at head_dim 512 the two warpgroups'
-- partial scores (2 x 64 x BN fp32 a row group); 2-byte elements.
function lib.awg_smem(p, shape)
  local hd = shape.head_dim
  local x = hd == 512 and p.NWG * 2 * 64 * p.BN * 4 or 0
  return 1024 + 64 * p.NWG * hd * 2 + p.STAGES * 2 * p.BN * hd * 2 + x
end

-- The space of attention_prefill_wg.cu over `params` (NWG, BN, STAGES, HP, RETIRE lists);
-- opts.experimental (optional) keeps it out of the default space. A builder, so that a variant
-- of the same kernel is a few lines.
function lib.awg_space(params, opts)
  opts = opts or {}
  return {
    op = "attention_prefill",
    source = "attention_prefill_wg.cu",
    experimental = opts.experimental,
    dtypes = { "fp16", "bf16" },
    params = params,

    defines = function(p, shape, dtype, device) return { HEAD_DIM = shape.head_dim } end,

    valid = function(p, shape, dtype, device, purpose)
      local ok, why = lib.attn_shape_valid(shape, false)
      if not ok then return false, why end
      -- ~200 registers a thread (128 fp32 accumulators of O, the scores, P): two warpgroups a
      -- block
      local wgs = p.NWG * shape.head_dim // 256
      if wgs > 2 then
        return false, string.format("%d warpgroups (NWG=%d x head_dim %d / 256) x 128 threads x "
                                    .. "~200 registers > 65536", wgs, p.NWG, shape.head_dim)
      end
      local group = lib.attn_group(shape)
      if group % p.HP ~= 0 then
        return false, string.format("HP=%d heads a block do not divide the %d query heads of a "
                                    .. "KV head", p.HP, group)
      end
      if shape.q_len < 1 or shape.q_len > shape.kv_len then
        return false, string.format("q_len=%d must be in 1..kv_len=%d", shape.q_len, shape.kv_len)
      end
      -- pruning only (a winner of the prefill chunk runs shorter chunks)
      if purpose ~= "launch" and p.NWG > 1 and 64 * p.NWG > 2 * shape.q_len * p.HP then
        return false, string.format("BM=%d rows for q_len=%d x HP=%d leaves most rows idle",
                                    64 * p.NWG, shape.q_len, p.HP)
      end
      return true
    end,

    requires = function(p, shape, dtype, device) return lib.wgmma_requires(dtype) end,

    threads = function(p, shape, dtype, device) return 128 * p.NWG * (shape.head_dim // 256) end,
    smem_static = function(p, shape, dtype, device) return 0 end,
    smem_dynamic = function(p, shape, dtype, device) return lib.awg_smem(p, shape) end,
    grid = function(p, shape, dtype, device)
      return { lib.ceil_div(shape.q_len * p.HP, 64 * p.NWG), shape.heads // p.HP, 1 }
    end,

    args = { "out", "q", "k", "v", { i32 = "q_len" }, { i32 = "kv_len" }, { i32 = "heads" },
             { i32 = "kv_heads" }, { i32 = "window" } },
  }
end

return lib
