#!/bin/sh
# check_install.sh BUILD_DIR CONSUMER_SRC CMAKE GENERATOR [EXTRA_CXX_FLAGS]
# Installs the build into a temporary prefix, builds consumer/ against it with
# find_package(zring CONFIG), runs it and checks what it prints.
set -eu

build=$1
consumer=$2
cmake=$3
generator=$4
extra_flags=${5:-}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zring-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

fail() {
  echo "check_install: $*" >&2
  exit 1
}

"$cmake" --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
test -f "$tmp/prefix/include/zring/zring.hpp" || fail "zring/zring.hpp not installed"

libdir=$(dirname "$(find "$tmp/prefix" -name 'zringConfig.cmake' | head -n 1)")/../..
libdir=$(cd "$libdir" && pwd)

# Only the temporary prefix may provide zring: no package registries.
"$cmake" -S "$consumer" -B "$tmp/build" -G "$generator" \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
  -DCMAKE_CXX_FLAGS="$extra_flags" -DCMAKE_EXE_LINKER_FLAGS="$extra_flags" \
  >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log" >&2; fail "configure failed"; }
grep -q "zring found in $tmp/prefix" "$tmp/configure.log" ||
  { cat "$tmp/configure.log" >&2; fail "zring was not found in the install prefix"; }
"$cmake" --build "$tmp/build" >"$tmp/build.log" 2>&1 ||
  { cat "$tmp/build.log" >&2; fail "consumer build failed"; }

output=$(LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$tmp/build/consumer") ||
  fail "consumer exited with an error: $output"
echo "$output"

expect() {
  echo "$output" | grep -q -- "$1" || fail "expected '$1' in the consumer's output"
}
expect "method=quant:8"
expect "shape=2x2 w\[3\]=1.000 error_ok=1"
expect "world2=no_communicator wire_bytes_positive=1"
expect "shared_same=1"
echo "check_install: ok"
