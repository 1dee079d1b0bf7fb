#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, with ASan + UBSan) into
# build-fuzz/ and runs each for FUZZ_SECONDS seconds (default 60). Each runs
# on a copy of its seed corpus, tests/fuzz/corpus/<target>/, kept in
# build-fuzz/fuzz/corpus/<target>/, so what the fuzzer generates never lands
# in git (and a later local run starts from it).
# Exits non-zero on any crash, leak, sanitizer report, timeout or
# out-of-memory, naming the input that reproduces it (docs/fuzzing.md).
# The targets run side by side, FUZZ_JOBS at a time (default: all of
# them). FUZZ_TARGETS="fuzz_wire ..." runs only those; FUZZ_BUILD_DIR moves
# the build; FUZZ_BUILD_ONLY=1 only builds; arguments go to every fuzzer
# (for example -jobs=2 -workers=2).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-60}
read -r -a targets <<<"${FUZZ_TARGETS:-fuzz_wire fuzz_config fuzz_codec_decode}"
started=$SECONDS

# The library and the fuzzers only: no daemon, tools, tests or benchmarks.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DZRING_FUZZ=ON -DZRING_WERROR=ON -DZRING_BUILD_BENCH=OFF \
  -DCMAKE_UNITY_BUILD=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target zring_fuzzers
echo "fuzz.sh: built in $((SECONDS - started)) s"
# FUZZ_BUILD_ONLY=1: the build alone (scripts/test.sh builds beside other work).
[ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0

# Longest input per target: a few messages, a YAML file, a payload of a
# couple of quantization blocks.
max_len() {
  case $1 in
    fuzz_wire) echo 8192 ;;
    fuzz_config) echo 4096 ;;
    *) echo 16384 ;;
  esac
}

# One target: its run, and the verdict on it. Exits non-zero when it failed.
fuzz_one() {
  local target=$1
  shift
  local corpus=$build/fuzz/corpus/$target
  local artifacts=$build/fuzz/artifacts/$target
  local log=$build/fuzz/$target.log
  mkdir -p "$corpus" "$artifacts"
  cp "$root/tests/fuzz/corpus/$target/"* "$corpus/"
  local options=(-max_total_time="$seconds" -max_len="$(max_len "$target")" -rss_limit_mb=2048
                 -timeout=30 -artifact_prefix="$artifacts/" -print_final_stats=1)
  local dict=$root/tests/fuzz/$target.dict
  [ -f "$dict" ] && options+=(-dict="$dict")
  echo "fuzz.sh: $target for ${seconds} s on $corpus"
  # The outer timeout is a backstop: after an out-of-memory report libFuzzer
  # first prints a heap profile, which on a heap of millions of small blocks
  # can take many minutes.
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      timeout -k 10 $((seconds + 180)) \
      "$build/tests/fuzz/$target" "${options[@]}" "$@" "$corpus" >"$log" 2>&1; then
    # "#123456 DONE cov: 1234 ft: 5678 corp: ..." and the final stats.
    local done_line rate
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 || true)
    rate=$(grep -o 'stat::average_exec_per_sec:[[:space:]]*[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    echo "fuzz.sh: $target passed: ${done_line:-no summary line} (${rate:-?} exec/s)"
    return 0
  fi
  {
    echo "fuzz.sh: $target FAILED; the end of $log:"
    tail -n 60 "$log"
    local reproducer
    reproducer=$(grep -o "Test unit written to [^ ]*" "$log" | tail -n 1 | sed 's/Test unit written to //' || true)
    if [ -n "$reproducer" ]; then
      echo "fuzz.sh: reproduce with: $build/tests/fuzz/$target $reproducer"
    else
      echo "fuzz.sh: no reproducer was saved (stopped after $((seconds + 180)) s?); see docs/fuzzing.md"
    fi
  } >&2
  return 1
}

# The targets run side by side, FUZZ_JOBS at a time (default: all at once):
# on CI's two cores, three targets of 60 s take 60 s, each with two thirds
# of a core (about 40 s of CPU), where one per core took 120 s.
jobs=${FUZZ_JOBS:-${#targets[@]}}
failed=()
pids=()
names=()
reap() {  # waits for the oldest running target
  if ! wait "${pids[0]}"; then failed+=("${names[0]}"); fi
  pids=("${pids[@]:1}")
  names=("${names[@]:1}")
}
for target in "${targets[@]}"; do
  while [ ${#pids[@]} -ge "$jobs" ]; do reap; done
  fuzz_one "$target" "$@" &
  pids+=("$!")
  names+=("$target")
done
while [ ${#pids[@]} -gt 0 ]; do reap; done

echo "fuzz.sh: done in $((SECONDS - started)) s"
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz.sh: failed: ${failed[*]}" >&2
  exit 1
fi
