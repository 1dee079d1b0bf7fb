#!/usr/bin/env bash
# The main job: installs what is needed, builds what the demo runs (zringd,
# zringctl, zring-demo and libzring; not the test suite, the benchmarks or
# the Python module), then starts a ring of 4 zringd on 127.0.0.1 and trains
# a small model with 4 worker processes through it, once per compression
# method. Arguments go to zring-demo (for example --steps 100 --methods
# none,quant:8).
#
# It configures BUILD_DIR (default: build/) as scripts/build.sh does, with
# the options the tree already has there, so scripts/build.sh or
# scripts/test.sh later build the rest in the same directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} >/dev/null
cmake --build "$build" -j "$(nproc)" --target zringd zringctl zring-demo
exec "$build/examples/zring-demo" "$@"
