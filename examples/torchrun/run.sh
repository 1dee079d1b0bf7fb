#!/usr/bin/env bash
# train.py as a 2-node torchrun job on this machine: two zringd with two local
# ranks each, one `torchrun --nnodes=2 --nproc_per_node=2` per node, world
# size 4 (local.py does the work).
#
#   examples/torchrun/run.sh [--method ef:topk:10%] [--steps 50]
#
# Uses the build in $BUILD_DIR (default: build/; make it with
# scripts/build.sh) and Debian's /usr/bin/python3 with python3-torch.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$root/build}
zringd=$build/daemon/zringd
if [ ! -x "$zringd" ] || ! ls "$build"/python/zring/_zring*.so >/dev/null 2>&1; then
  echo "run.sh: no zringd or Python module zring in $build; build first:" >&2
  echo "  ${BUILD_DIR:+BUILD_DIR=$BUILD_DIR }$root/scripts/build.sh" >&2
  exit 1
fi
export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}
exec /usr/bin/python3 "$here/local.py" --zringd "$zringd" "$@"
