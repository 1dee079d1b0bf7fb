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
build=${BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"

# Each stage's time, for CI's log (the whole run should stay under 30 min).
stage_started=$SECONDS
stage_done() {
  echo "test.sh: $1 took $((SECONDS - stage_started)) s (total $SECONDS s)"
  stage_started=$SECONDS
}
sanitizers=$([ "${ZRING_SKIP_SANITIZERS:-0}" != 1 ] && echo 1 || echo 0)
fuzz=$([ "${ZRING_SKIP_FUZZ:-0}" != 1 ] && echo 1 || echo 0)

# -g1 (line tables, no variables): a third less compile time than -g, and
# still the file:line of every frame. test_ops_packages builds the packages
# with these flags too, and so takes every object from ccache.
BUILD_DIR=$build "$root/scripts/build.sh" -DZRING_WERROR=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
stage_done "the build"

# The sanitizer and fuzz builds, unity builds like every build here. ASan
# at -O1 -g1: half the compile time of -O2 -g, and still the file:line of
# every frame in a report. TSan at -O2 (its tests run long), and only what
# its tests run.
build_asan() {
  BUILD_DIR=$root/build-asan "$root/scripts/build.sh" -DZRING_WERROR=ON \
    -DZRING_SANITIZE=address,undefined -DZRING_BUILD_BENCH=OFF -DZRING_BUILD_PYTHON=OFF \
    -DZRING_TEST_NETNS=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
}
build_tsan_and_fuzz() {
  if [ "$sanitizers" = 1 ]; then
    BUILD_DIR=$root/build-tsan BUILD_TARGETS="test_collective test_faults zringd ring_client" \
      "$root/scripts/build.sh" -DZRING_WERROR=ON -DZRING_SANITIZE=thread \
      -DZRING_BUILD_BENCH=OFF -DZRING_BUILD_PYTHON=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
  fi
  if [ "$fuzz" = 1 ]; then
    FUZZ_BUILD_ONLY=1 "$root/scripts/fuzz.sh"
  fi
}

# Each of those builds compiles while the stage before the one that needs
# it runs (the ASan build beside the plain tests, the TSan and fuzz builds
# beside the ASan tests), at the lowest CPU priority: the tests wait on
# sockets, processes and timeouts much of the time (on CI's two cores the
# plain ones take 450 CPU-seconds in a pass of 444 s), and the compiler
# takes what they leave without slowing them. Its output goes to a log in
# the build directory, shown when it fails; it stops when this script does.
background_pid=
background_log=
start_background() {  # LOG FUNCTION
  background_log=$1
  set -m  # a process group of its own, which stop_background ends
  (
    set +m
    renice -n 19 -p "$BASHPID" >/dev/null
    "$2"
  ) >"$background_log" 2>&1 &
  background_pid=$!
  set +m
}
finish_background() {  # WHAT: waits for it; exits, showing its log's end, when it failed
  [ -n "$background_pid" ] || return 0
  local pid=$background_pid
  background_pid=
  if ! wait "$pid"; then
    echo "test.sh: $1 failed; the end of $background_log:" >&2
    tail -n 100 "$background_log" >&2
    exit 1
  fi
  stage_done "$1 (what was left of it when the tests before it ended)"
}
stop_background() {
  if [ -n "$background_pid" ]; then kill -- -"$background_pid" 2>/dev/null || true; fi
}
trap stop_background EXIT

if [ "$sanitizers" = 1 ]; then
  start_background "$build/build-asan.log" build_asan
elif [ "$fuzz" = 1 ]; then
  start_background "$build/build-fuzz.log" build_tsan_and_fuzz
fi

ctest --test-dir "$build" --output-on-failure -j 2
stage_done "the tests"

if [ "$sanitizers" = 1 ]; then
  finish_background "the ASan + UBSan build"
  start_background "$build/build-tsan-and-fuzz.log" build_tsan_and_fuzz
  # The sanitized daemons run several times slower: the tests' wall-clock
  # bounds stretch twice (tests/support/time_scale.hpp).
  ZRING_TEST_TIME_SCALE=2 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$root/build-asan" --output-on-failure -j 2 -E '^(format_check|layers_check.*)$'
  stage_done "the ASan + UBSan tests"

  # TSan: only what has threads of its own: the in-process ring, and zringd
  # (its ring, IPC and ZeroMQ threads) through test_faults, which also runs
  # whole ops. Of the cases on large tensors, only those whose threads do
  # what no other case's do (tests/collective/CMakeLists.txt).
  finish_background "the TSan and fuzz builds"
  ZRING_TEST_TIME_SCALE=2 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp \
    ctest --test-dir "$root/build-tsan" --output-on-failure -j 2 -R '^(test_collective.*|test_faults)$'
  stage_done "the TSan tests"
fi

if [ "$fuzz" = 1 ]; then
  finish_background "the fuzz build"
  "$root/scripts/fuzz.sh"
  stage_done "the fuzzers"
fi
echo "test.sh: all tests passed"
