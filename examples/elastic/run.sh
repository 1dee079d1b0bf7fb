#!/usr/bin/env bash
# Trains examples/digits' MLP with 4 workers on a local ring of 4 zringd,
# twice: undisturbed, and with node n2 killed part-way and started again
# later; prints the membership timeline, checks that every worker ends
# with the same weights and compares the accuracies.
#
#   examples/elastic/run.sh [--steps N] [--method M] [--kill-at F] [--back-at F]
#
# Uses the build in $BUILD_DIR (default: build/ at the top of the tree; make
# it with scripts/build.sh) and Debian's /usr/bin/python3 with python3-torch
# and python3-sklearn (scripts/install-deps.sh). Ctrl-C, a failure or the end
# stops every daemon and worker it started.
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
exec /usr/bin/python3 "$here/elastic.py" --zringd "$zringd" "$@"
