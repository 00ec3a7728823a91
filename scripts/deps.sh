#!/usr/bin/env bash
# deps.sh — makes sure the Debian packages tailor builds with are installed.
# As root it installs what is missing; otherwise it prints the exact apt-get line and fails.
set -euo pipefail
need=(cmake make gcc liblua5.4-dev libsqlite3-dev libcjson-dev)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "deps: missing packages; run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -f $cuda/include/nvrtc.h ]]; then
  echo "deps: no CUDA toolkit at $cuda (no include/nvrtc.h): install the CUDA 13 toolkit or set CUDA_HOME" >&2
  exit 1
fi
