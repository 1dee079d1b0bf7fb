#!/usr/bin/env bash
# Configures and builds zring with CMake into BUILD_DIR (default: build/).
# Extra arguments go to the CMake configure step; BUILD_TARGETS, below.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
# ccache, when installed (scripts/install-deps.sh installs it), keeps every
# object: a rebuild, and the fresh packaging build of test_ops_packages,
# take them from it. The build directory is left out of its hash, and the
# paths below the source tree are made relative to it, so that two build
# trees at the same depth share their objects (a unity build compiles files
# it writes into the build tree).
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_NOHASHDIR=true CCACHE_BASEDIR=$root
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
  "${launcher[@]}" "$@" >/dev/null
# BUILD_TARGETS="a b": only those targets (and what they need).
read -r -a targets <<<"${BUILD_TARGETS:-}"
cmake --build "$build" -j "$(nproc)" ${targets[@]+--target "${targets[@]}"}
