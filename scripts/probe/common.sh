# common.sh — sourced by the probe scripts that run on the GPU machine: $OUT made, the C
# dependencies' environment (scripts/gpu-env.sh), T = the tailor binary of build-gpu/ (built
# when missing; the caller exits if the build fails).
#   source scripts/probe/common.sh || exit 1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source scripts/gpu-env.sh
T=$PWD/build-gpu/tailor
[[ -x $T ]] || bash scripts/gpu-build.sh
