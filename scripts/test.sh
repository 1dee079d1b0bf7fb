#!/usr/bin/env bash
# Every test: installs what is needed, builds, and runs the whole suite
# (unit, multi-process integration) with CTest; then the same suite again
# in an AddressSanitizer + UndefinedBehaviorSanitizer build; then the
# libFuzzer targets for a minute each (scripts/fuzz.sh, a clang build).
# Exits non-zero when anything fails. ZRING_SKIP_SANITIZERS=1 skips the
# second build, ZRING_SKIP_FUZZ=1 the fuzzers.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"

BUILD_DIR=${BUILD_DIR:-$root/build} "$root/scripts/build.sh" -DZRING_WERROR=ON
ctest --test-dir "${BUILD_DIR:-$root/build}" --output-on-failure -j 2

if [ "${ZRING_SKIP_SANITIZERS:-0}" != 1 ]; then
  BUILD_DIR=$root/build-asan "$root/scripts/build.sh" -DZRING_WERROR=ON \
    -DZRING_SANITIZE=address,undefined -DZRING_BUILD_BENCH=OFF
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$root/build-asan" --output-on-failure -j 2
fi

if [ "${ZRING_SKIP_FUZZ:-0}" != 1 ]; then
  "$root/scripts/fuzz.sh"
fi
echo "test.sh: all tests passed"
