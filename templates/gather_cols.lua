-- gather_cols.lua — search space of templates/gather_cols.cu (op "gather_cols"; shape keys rows,
-- cols): out[r, j] = a[r, idx[j]]. A thread writes VEC consecutive columns of ROWS rows, its
-- VEC indices loaded once (before the grid wait: no kernel writes them) for all its rows.
return {
  op = "gather_cols",
  source = "gather_cols.cu",
  dtypes = { "fp16", "bf16" },

  params = {
    THREADS = { 64, 128, 256 },
    VEC = { 2, 4, 8 },
    ROWS = { 1, 4, 16 },
  },

  valid = function(p, shape, dtype, device, purpose)
    if shape.cols % p.VEC ~= 0 then
      return false, string.format("cols=%d is not a multiple of VEC=%d", shape.cols, p.VEC)
    end
    if purpose ~= "launch" then
      local per_block = p.THREADS * p.VEC
      if per_block > 2 * shape.cols and per_block > 256 then
        return false, string.format("THREADS*VEC=%d leaves most threads idle for cols=%d",
                                    per_block, shape.cols)
      end
      if p.ROWS > 1 and p.ROWS > shape.rows then
        return false, string.format("ROWS=%d exceeds rows=%d", p.ROWS, shape.rows)
      end
    end
    return true
  end,

  requires = tailor.requires_dtype,

  threads = function(p, shape, dtype, device) return p.THREADS end,
  smem_static = function(p, shape, dtype, device) return 0 end,
  smem_dynamic = function(p, shape, dtype, device) return 0 end,
  grid = function(p, shape, dtype, device)
    local per_block = p.THREADS * p.VEC
    return { (shape.cols + per_block - 1) // per_block, (shape.rows + p.ROWS - 1) // p.ROWS, 1 }
  end,

  args = { "out", "a", "idx", { i32 = "rows" }, { i32 = "cols" } },
}
