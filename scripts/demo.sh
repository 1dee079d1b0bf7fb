#!/usr/bin/env bash
# The main job: installs what is needed, builds, then starts a ring of 4
# zringd on 127.0.0.1 and trains a small model with 4 worker processes
# through it, once per compression method. Arguments go to zring-demo
# (for example --steps 100 --methods none,quant:8).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
exec "${BUILD_DIR:-$root/build}/examples/zring-demo" "$@"
