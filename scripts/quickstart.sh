#!/usr/bin/env bash
# Quickstart comparison: set up and build (scripts/setup.sh), then train, evaluate and report the five
# paradigms at debug size on the Debian `fortunes` corpus in a few CPU minutes (configs/quickstart.json). Extra arguments go to
# `aobench run`, e.g. scripts/quickstart.sh --set train.max_iters=50   or   --force to start over.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${AOBENCH_BUILD_DIR:-build}
"$BUILD_DIR/aobench" run configs/quickstart.json "$@"
echo "quickstart: report at $(pwd)/runs/quickstart/report/index.html (tables: runs/quickstart/report/summary.md)"
