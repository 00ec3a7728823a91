#!/usr/bin/env bash
# same-binaries.sh — does a template edit change any machine code? No GPU needed.
#   bash scripts/same-binaries.sh [REV] [TAILOR_BIN]
# Compiles every survivor of the shapes tests/cli_plan_compile.sh lists (sm_90 and sm_75, every
# template family) twice with NVRTC — with REV's templates (default HEAD, through
# TAILOR_TEMPLATE_PATH) and with the working tree's (built into TAILOR_BIN, default build/tailor,
# so rebuild first) — and compares the cubins byte for byte. Exit 0 when every kernel is the
# same; otherwise the kernels that differ, or exist on one side only, are listed (a refactor
# that should not change behaviour then needs a GPU run after all).
set -uo pipefail
rev=${1:-HEAD}
T=${2:-build/tailor}
here=$(cd "$(dirname "$0")/.." && pwd)
[[ -x $T ]] || { echo "same-binaries: $T is not an executable (build first)"; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
git -C "$here" archive "$rev" templates | tar -x -C "$tmp" ||
  { echo "same-binaries: cannot read the templates of $rev"; exit 2; }
mkdir -p "$tmp/old" "$tmp/new"
# templates new in the working tree: REV would fall back to their embedded spaces (with REV's
# spacelib, which may lack their helpers); a stub of the same op and source that refuses
# everything stands in for them, and their kernels are listed as new rather than as differences
new_templates=()
for f in "$here"/templates/*.lua; do
  b=$(basename "$f")
  [[ -e $tmp/templates/$b ]] && continue
  new_templates+=("${b%.lua}")
  op=$(sed -n 's/^  op = "\([a-z0-9_]*\)",$/\1/p' "$f" | head -1)
  src=$(sed -n 's/^  source = "\([a-z0-9_.]*\)",$/\1/p' "$f" | head -1)
  if [[ -z $op || -z $src ]]; then
    # a space made by a spacelib builder (`return tailor.w4g_space(...)`): the file itself, its
    # every configuration refused; a spacelib helper REV lacks (w4t_params before session 49)
    # stands in as the identity, so that the builder still runs
    { echo "local lib_ = tailor"
      echo "local tailor = setmetatable({}, { __index = function(_, k)"
      echo "  local v = lib_[k]; if v == nil then return function(x) return x end end; return v end })"
      echo "local space = (function()"; cat "$f"; echo "end)()"
      echo 'space.valid = function() return false, "not in this revision" end'
      echo "return space"; } >"$tmp/templates/$b"
    continue
  fi
  cat >"$tmp/templates/$b" <<STUB
return { op = "$op", source = "$src", params = { STUB = { 0 } },
  valid = function() return false, "not in this revision" end,
  threads = 32, smem_static = 0, smem_dynamic = 0, grid = { 1 }, args = {} }
STUB
done
n=0
while read -r dev dtype op shape; do
  [[ -z $dev || $dev == \#* ]] && continue
  n=$((n + 1))
  TAILOR_TEMPLATE_PATH="$tmp/templates" "$T" plan --device "$dev" --dtype "$dtype" --op "$op" \
    --shape "$shape" --dump "$tmp/old" --quiet >/dev/null 2>"$tmp/err" ||
    { echo "$rev: $op $shape on $dev: $(head -c 300 "$tmp/err")"; }
  TAILOR_TEMPLATE_PATH= "$T" plan --device "$dev" --dtype "$dtype" --op "$op" --shape "$shape" \
    --dump "$tmp/new" --quiet >/dev/null 2>"$tmp/err" ||
    { echo "working tree: $op $shape on $dev: $(head -c 300 "$tmp/err")"; }
done < <(sed -n "/^while read -r dev dtype op shape/,/^LIST$/p" "$here/tests/cli_plan_compile.sh" |
         sed -n "/<<'LIST'/,/^LIST$/{/<<'LIST'/d;/^LIST$/d;p}")
for tpl in "${new_templates[@]}"; do
  c=$(ls "$tmp/new" | grep -c "__${tpl}__")
  echo "same-binaries: $tpl is new since $rev ($c kernels, not compared)"
  rm -f "$tmp/new"/*"__${tpl}__"*
done
total=$(ls "$tmp/new" | wc -l)
if diff -rq "$tmp/old" "$tmp/new" >"$tmp/diff"; then
  echo "same-binaries: $total kernels of $n shapes compile to the same cubins as $rev"
  exit 0
fi
echo "same-binaries: against $rev, of $total kernels ($n shapes):"
sed -e "s|$tmp/old|$rev|g" -e "s|$tmp/new|working tree|g" "$tmp/diff"
echo "same-binaries: to see what changed in one of them, dump its shape's PTX from both sides and"
echo "  diff it: tailor plan ... --dump DIR --ptx (with TAILOR_TEMPLATE_PATH=<$rev's templates> for"
echo "  the old side; register numbers differ freely, so normalise them: sed -E 's/%[a-z]+[0-9]+/%R/g')"
exit 1
