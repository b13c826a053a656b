#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (or the GPU machine) and builds aobench into build/.
#   - Debian packages: Boost (DLL headers, program_options), nlohmann_json, GoogleTest, Google Benchmark,
#     PCRE2, liblzma and libzstd (.xz / .zst inputs of prepare), OpenSSL's libcrypto (SHA-256 of checkpoints and token
#     shards), gnuplot, ccache, and `fortunes`
#     (the real-English quickstart corpus).
#   - LibTorch: the torch==2.11.0 pip wheel, installed into a venv only when `python3 -c "import torch"` fails.
# Options (environment): AOBENCH_BUILD_DIR (default build), AOBENCH_VENV (default ~/.cache/aobench/venv),
# AOBENCH_JOBS (default nproc), AOBENCH_CMAKE_ARGS (extra CMake flags), AOBENCH_SKIP_APT=1.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache: paths relative to the checkout and no cwd in the hash, so every clone shares one cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# The targets share a precompiled header; ccache caches such compiles only with this sloppiness.
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
BUILD_DIR=${AOBENCH_BUILD_DIR:-build}
VENV=${AOBENCH_VENV:-$HOME/.cache/aobench/venv}
JOBS=${AOBENCH_JOBS:-$(nproc)}

packages=(build-essential cmake ninja-build ccache pkg-config python3-venv libboost-dev
          libboost-program-options-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev libpcre2-dev
          liblzma-dev libzstd-dev libssl-dev gnuplot-nox xz-utils fortunes clang-format-14)
if [[ "${AOBENCH_SKIP_APT:-0}" != 1 ]] && command -v apt-get >/dev/null; then
  missing=()
  for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]})); then
    echo "setup: installing Debian packages: ${missing[*]}"
    SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

PYTHON=python3
if ! python3 -c "import torch" >/dev/null 2>&1; then
  if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
    echo "setup: installing torch==2.11.0 into $VENV (first time only)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q torch==2.11.0
  fi
  PYTHON="$VENV/bin/python"
fi
echo "setup: torch $("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null) via $PYTHON"

GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DPython3_EXECUTABLE="$PYTHON" ${AOBENCH_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "setup: built $BUILD_DIR/aobench"
