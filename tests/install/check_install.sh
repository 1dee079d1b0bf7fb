#!/bin/sh
# check_install.sh BUILD_DIR CONSUMER_SRC CMAKE GENERATOR [EXTRA_CXX_FLAGS] [PYTHON]
# Installs the build into a prefix outside the system's library path
# (TMP/opt/zring), then, with LD_LIBRARY_PATH unset throughout:
# - runs the installed zringd and zringctl and checks that they load the
#   libzring of that prefix;
# - builds consumer/ against the prefix with find_package(zring CONFIG), runs
#   it and checks what it prints;
# - with PYTHON, imports the installed Python module zring from the prefix
#   (it must load the prefix's libzring too) and reduces with it;
# - moves the whole prefix elsewhere and runs the programs (and the module)
#   from there again: their RPATHs are relative to themselves.
set -eu

build=$1
consumer=$2
cmake=$3
generator=$4
extra_flags=${5:-}
python=${6:-}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zring-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
unset LD_LIBRARY_PATH

fail() {
  echo "check_install: $*" >&2
  exit 1
}

prefix=$tmp/opt/zring
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
test -f "$prefix/include/zring/zring.hpp" || fail "zring/zring.hpp not installed"

# installed PREFIX NAME: the one installed file called NAME, relative to PREFIX.
installed() {
  found=$(cd "$1" && find . -name "$2" \( -type f -o -type l \) | sed 's|^\./||')
  [ -n "$found" ] && [ "$(echo "$found" | wc -l)" -eq 1 ] ||
    fail "expected one $2 under $1, found: ${found:-none}"
  echo "$found"
}
zringd=$(installed "$prefix" zringd)
zringctl=$(installed "$prefix" zringctl)
config=etc/zring/zring.yaml  # PREFIX/etc for any prefix but /usr (cmake/Packaging.cmake)
test -f "$prefix/$config" || fail "no $config under the prefix"

# loads_from_prefix FILE PREFIX: FILE's libzring.so.0 resolves inside PREFIX.
loads_from_prefix() {
  lib=$(ldd "$1" | sed -n 's|^[[:space:]]*libzring\.so\.0 => \([^ ]*\) .*|\1|p')
  case $lib in
    "$2"/*) ;;
    *) ldd "$1" >&2; fail "$1 loads libzring.so.0 from '${lib:-nowhere}', not from $2" ;;
  esac
}

# programs PREFIX: the installed zringd and zringctl run from PREFIX.
programs() {
  loads_from_prefix "$1/$zringd" "$1"
  loads_from_prefix "$1/$zringctl" "$1"
  out=$("$1/$zringd" --version 2>&1) || fail "$1/$zringd --version failed: $out"
  echo "$out" | grep -q '^zringd [0-9]' || fail "unexpected $zringd --version: $out"
  echo "$out"
  out=$("$1/$zringctl" check-config "$1/$config" 2>&1) ||
    fail "$1/$zringctl check-config failed: $out"
  echo "$out" | grep -q "ok: 1 nodes x 1 local ranks" || fail "unexpected check-config output: $out"
}

# module PREFIX: the installed Python module imports from PREFIX, loads its
# libzring and reduces (standalone, world size 1).
module() {
  so=$(cd "$1" && find . -name '_zring*.so' -path '*/zring/*' | sed 's|^\./||')
  [ -n "$so" ] || fail "$python given but the Python module is not installed under $1"
  site=$1/$(dirname "$(dirname "$so")")
  out=$(cd "$tmp" && PYTHONPATH=$site PYTHONDONTWRITEBYTECODE=1 "$python" -c '
import sys, numpy, zring
lib = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libzring.so" in l})
avg = zring.CompressedAllReduce("quant:8", 1).all_reduce({"w": numpy.ones(4, numpy.float32)})
print("module", zring.__file__)
print("libzring", " ".join(lib))
print("zring", zring.__version__, "w", float(avg["w"][0]))
' 2>&1) || fail "the installed Python module failed: $out"
  echo "$out"
  echo "$out" | grep -q "^module $site/zring/__init__.py$" || fail "zring was not imported from $site"
  echo "$out" | grep -q "^libzring $1/[^ ]*libzring\.so[.0-9]*$" ||
    fail "the module did not load the libzring of $1"
  echo "$out" | grep -q "^zring [0-9.]* w 1.0$" || fail "unexpected result from the module"
}

programs "$prefix"
[ -z "$python" ] || module "$prefix"

# Only the prefix may provide zring: no package registries.
"$cmake" -S "$consumer" -B "$tmp/build" -G "$generator" \
  -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
  -DCMAKE_CXX_FLAGS="$extra_flags" -DCMAKE_EXE_LINKER_FLAGS="$extra_flags" \
  >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log" >&2; fail "configure failed"; }
grep -q "zring found in $prefix" "$tmp/configure.log" ||
  { cat "$tmp/configure.log" >&2; fail "zring was not found in the install prefix"; }
"$cmake" --build "$tmp/build" >"$tmp/build.log" 2>&1 ||
  { cat "$tmp/build.log" >&2; fail "consumer build failed"; }
loads_from_prefix "$tmp/build/consumer" "$prefix"

output=$("$tmp/build/consumer") || fail "consumer exited with an error: $output"
echo "$output"

expect() {
  echo "$output" | grep -q -- "$1" || fail "expected '$1' in the consumer's output"
}
expect "method=quant:8"
expect "shape=2x2 w\[3\]=1.000 error_ok=1"
expect "world2=no_communicator wire_bytes_positive=1"
expect "shared_same=1"

# The same tree, moved: nothing in it names the prefix it was installed to.
moved=$tmp/elsewhere/zring-moved
mkdir -p "$tmp/elsewhere"
mv "$prefix" "$moved"
programs "$moved"
[ -z "$python" ] || module "$moved"
echo "check_install: ok"
