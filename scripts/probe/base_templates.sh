#!/usr/bin/env bash
# base_templates.sh — on the development machine: REV's templates/ into probe-variants/base/ (ignored;
# name probe-variants in the device tool's carry), so that a GPU run can time the working tree's
# templates against REV's in the same run (TAILOR_TEMPLATE_PATH=probe-variants/base/templates,
# its own cache: the template hashes differ). gpu-check.sh attn uses it.
#   bash scripts/probe/base_templates.sh [REV]   (default HEAD)
set -euo pipefail
rev=${1:-HEAD}
rm -rf probe-variants/base
mkdir -p probe-variants/base
git archive "$rev" templates | tar -x -C probe-variants/base
git rev-parse --short "$rev" >probe-variants/base/REV
echo "probe-variants/base/templates: templates of $(cat probe-variants/base/REV)"
