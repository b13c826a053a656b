#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite with ctest. Tests that need the shared data
# folder read AOBENCH_DATA_DIR (default: ../shared/data beside the repository) and skip without it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [[ -z "${AOBENCH_DATA_DIR:-}" && -d ../shared/data ]]; then
  export AOBENCH_DATA_DIR=$(cd ../shared/data && pwd)
fi
echo "test: AOBENCH_DATA_DIR=${AOBENCH_DATA_DIR:-<unset: data tests skip>}"
ctest --test-dir "${AOBENCH_BUILD_DIR:-build}" -j "$(nproc)" --output-on-failure "$@"
