#!/usr/bin/env bash
# Formats the project's C++/CUDA sources with .clang-format; `--check` changes nothing and fails (exit 1)
# naming every file that differs (run by .ci/run). Uses clang-format 14 (Debian 12's; scripts/setup.sh
# installs it) because another major version formats a few constructs differently.
set -euo pipefail
cd "$(dirname "$0")/.."
tool=$(command -v clang-format-14 || command -v clang-format || true)
if [[ -z "$tool" ]]; then
  echo "format: clang-format not found; HINT: sudo apt-get install clang-format-14 (scripts/setup.sh does)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if [[ "${1:-}" == "--check" ]]; then
  bad=()
  for f in "${files[@]}"; do
    "$tool" --style=file "$f" | cmp -s - "$f" || bad+=("$f")
  done
  if (( ${#bad[@]} )); then
    printf 'format: %s differs from .clang-format\n' "${bad[@]}" >&2
    echo "format: ${#bad[@]} file(s); HINT: run scripts/format.sh and commit the result" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files match .clang-format"
else
  "$tool" --style=file -i "${files[@]}"
fi
