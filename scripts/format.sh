#!/usr/bin/env bash
# Formats every C++ file of the tree as .clang-format says (what CTest's
# format_check checks), except tests/layers/bad_tree/ (test data).
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files --cached --others --exclude-standard -- '*.cpp' '*.hpp' |
  grep -v '^tests/layers/bad_tree/' | xargs clang-format -i --style=file
