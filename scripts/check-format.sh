#!/usr/bin/env bash
# Checks that every C++ file of the project is formatted as .clang-format
# says (Google's style), with Debian's clang-format 14; lists those that are
# not and exits 1. With --fix, formats them in place instead.
#   scripts/check-format.sh [--fix]
# FlatBuffers' generated headers (schema/, at build time) are not in git and
# so not checked.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

FORMAT=clang-format-14
if ! command -v "$FORMAT" >/dev/null; then
  echo "check-format: $FORMAT not found (scripts/install-deps.sh installs it)" >&2
  exit 2
fi

mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cpp')
if [ "${1:-}" = "--fix" ]; then
  "$FORMAT" -i "${files[@]}"
  exit 0
fi

bad=()
for f in "${files[@]}"; do
  if ! "$FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [ "${#bad[@]}" -gt 0 ]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} files are not formatted" \
       "(scripts/check-format.sh --fix formats them):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
