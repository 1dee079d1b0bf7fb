#!/usr/bin/env bash
# Installs the Debian 12 packages zring builds, tests and runs with.
# Skips apt entirely when everything is already there. Run as root.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libyaml-cpp-dev
  libboost-dev libboost-test-dev libboost-program-options-dev
  libbenchmark-dev libsystemd-dev
  systemd procps curl dpkg-dev file lintian
  clang libclang-rt-14-dev clang-format
  python3-dev pybind11-dev python3-numpy python3-torch python3-sklearn python3-matplotlib
  python3-pytest
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: need root to install packages (run with sudo)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
