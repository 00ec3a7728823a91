#!/usr/bin/env bash
# gpu-build.sh — on the GPU machine: configure and build into build-gpu/ (log in $OUT/build.log).
set -uo pipefail
source scripts/gpu-env.sh
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{ cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu -j"$(nproc)"; } \
  >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "build ok"
