#!/usr/bin/env bash
# Configures and builds zring with CMake into BUILD_DIR (default: build/).
# Extra arguments go to the CMake configure step.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
# ccache, when installed (scripts/install-deps.sh installs it), keeps every
# object: a rebuild, and the fresh packaging build of test_ops_packages,
# take them from it. The build directory is left out of its hash, so that
# two build trees of this source tree share their objects.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_NOHASHDIR=true
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
  "${launcher[@]}" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
