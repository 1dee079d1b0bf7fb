#!/usr/bin/env bash
# The side-by-side all-reduce benchmark in one command: zring (every method)
# against Gloo and Open MPI on this machine, as described in
# docs/benchmarks.md. Installs the Debian packages it needs, builds (Release,
# into build-bench/ unless BUILD_DIR says otherwise), then runs
# bench/allreduce_bench.py with the given arguments:
#
#   bench/run.sh                   # 4 ranks on loopback, 4 B .. 256 MiB (~15 min)
#   bench/run.sh --quick           # 4 B, 4 KiB, 1 MiB, 64 MiB (~3 min)
#   bench/run.sh --netns           # each node in a namespace, 1 Gbit/s links
#   bench/run.sh --netns --rate none --mtu 1500   # unshaped links, MTU 1500
#   bench/run.sh --scaling         # 2, 3, 4, 6, 8 ranks at 64 MiB
#   bench/run.sh --fusion          # ResNet-50's 161 tensors against one tensor
#   bench/run.sh --sizes 4K,64M --ranks 3 --methods none,quant:8
#
# Results: results/<time>-<mode>/ and results/latest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export BUILD_DIR=${BUILD_DIR:-$root/build-bench}
export BUILD_TYPE=${BUILD_TYPE:-Release}

for arg in "$@"; do
  if [ "$arg" = -h ] || [ "$arg" = --help ]; then
    exec /usr/bin/python3 "$root/bench/allreduce_bench.py" --help
  fi
done

"$root/scripts/install-deps.sh"

# The peers and the driver's tools. Without the peers' packages the build
# leaves their clients out and the report says they are unavailable.
packages=(python3 iproute2 libgloo-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -ne 0 ]; then
  echo "bench/run.sh: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "bench/run.sh: need root to install packages (run with sudo)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

"$root/scripts/build.sh" -DZRING_BUILD_BENCH=ON -DZRING_BUILD_TESTS=OFF

# The driver deletes its namespaces itself, also on Ctrl-C; this catches a
# driver that was killed outright.
cleanup() {
  if [ "$(id -u)" -eq 0 ]; then
    /usr/bin/python3 "$root/bench/allreduce_bench.py" --cleanup-netns >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
status=0
/usr/bin/python3 "$root/bench/allreduce_bench.py" --build-dir "$BUILD_DIR" "$@" || status=$?
exit "$status"
