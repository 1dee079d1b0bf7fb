#!/usr/bin/env bash
# Every test: installs what is needed, builds, and runs the whole suite
# (unit, multi-process integration) with CTest; then the same suite again
# in an AddressSanitizer + UndefinedBehaviorSanitizer build (all but the
# network-namespace test, which adds two minutes and no code path that
# test_faults does not run under ASan too, the packages, which are built
# without sanitizers, and the source checks format_check and layers_check*,
# which run no zring code); then the multi-threaded parts
# (the ring schedules, zringd under its fault tests) in a ThreadSanitizer
# build; then the libFuzzer targets for FUZZ_SECONDS each
# (scripts/fuzz.sh, a clang build).
# Exits non-zero when anything fails. ZRING_SKIP_SANITIZERS=1 skips the
# ASan and TSan builds, ZRING_SKIP_FUZZ=1 the fuzzers.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"

# Each stage's time, for CI's log (the whole run should stay under 30 min).
stage_started=$SECONDS
stage_done() {
  echo "test.sh: $1 took $((SECONDS - stage_started)) s (total $SECONDS s)"
  stage_started=$SECONDS
}

# -g1 (line tables, no variables): a third less compile time than -g, and
# still the file:line of every frame. test_ops_packages builds the packages
# with these flags too, and so takes every object from ccache.
BUILD_DIR=${BUILD_DIR:-$root/build} "$root/scripts/build.sh" -DZRING_WERROR=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
stage_done "the build"
ctest --test-dir "${BUILD_DIR:-$root/build}" --output-on-failure -j 2
stage_done "the tests"

if [ "${ZRING_SKIP_SANITIZERS:-0}" != 1 ]; then
  # -O1 -g1: half the compile time of -O2 -g, and still the file:line of
  # every frame in a report. The sanitizer builds are unity builds (several
  # files compiled as one): a third less compile time. The plain build is
  # not, so that it still shows a file that misses an include.
  BUILD_DIR=$root/build-asan "$root/scripts/build.sh" -DZRING_WERROR=ON \
    -DZRING_SANITIZE=address,undefined -DZRING_BUILD_BENCH=OFF -DZRING_BUILD_PYTHON=OFF \
    -DZRING_TEST_NETNS=OFF -DCMAKE_UNITY_BUILD=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
  stage_done "the ASan + UBSan build"
  # The sanitized daemons run several times slower: the tests' wall-clock
  # bounds stretch twice (tests/support/time_scale.hpp).
  ZRING_TEST_TIME_SCALE=2 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$root/build-asan" --output-on-failure -j 2 -E '^(format_check|layers_check.*)$'
  stage_done "the ASan + UBSan tests"

  # TSan: only what has threads of its own: the in-process ring, and zringd
  # (its ring, IPC and ZeroMQ threads) through test_faults, which also runs
  # whole ops. Of the cases on large tensors, only those whose threads do
  # what no other case's do (tests/collective/CMakeLists.txt).
  # -O2 (the tests run long under TSan: not -O1) with -g1.
  cmake -S "$root" -B "$root/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZRING_WERROR=ON \
    -DZRING_SANITIZE=thread -DZRING_BUILD_BENCH=OFF -DZRING_BUILD_PYTHON=OFF \
    -DCMAKE_UNITY_BUILD=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" >/dev/null
  cmake --build "$root/build-tsan" -j "$(nproc)" --target test_collective test_faults zringd ring_client
  ZRING_TEST_TIME_SCALE=2 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp \
    ctest --test-dir "$root/build-tsan" --output-on-failure -j 2 -R '^(test_collective.*|test_faults)$'
  stage_done "the TSan build and tests"
fi

if [ "${ZRING_SKIP_FUZZ:-0}" != 1 ]; then
  "$root/scripts/fuzz.sh"
  stage_done "the fuzzers"
fi
echo "test.sh: all tests passed"
