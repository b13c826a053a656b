#!/usr/bin/env bash
# Builds aobench on the GPU machine, which has CUDA, PyTorch 2.11, GoogleTest, Google Benchmark and
# nlohmann_json but no network, no Boost.Program_options library and no PCRE2 / liblzma / libzstd headers. OpenSSL's
# headers and libcrypto are there (Ubuntu 24.04's libssl-dev, OpenSSL 3.0.13, seen on 2026-11-29), so
# find_package(OpenSSL) finds them in /usr and .debs carries no libssl-dev.
# Route: the Debian packages and Boost's headers in .debs/ (fetched on a networked machine with
# scripts/fetch_gpu_debs.sh) are unpacked into a private prefix that CMake and the loader are pointed at.
# Usage (on the GPU machine, repo root):  source scripts/gpu_build.sh   → build/aobench, LD_LIBRARY_PATH set.
set -eo pipefail
PREFIX=${AOBENCH_DEB_PREFIX:-/tmp/aobench-deps}
if [[ ! -d .debs ]] || ! ls .debs/*.deb >/dev/null 2>&1; then
  echo "gpu_build: no .debs/*.deb here; run scripts/fetch_gpu_debs.sh on a networked machine and carry .debs" >&2
  return 1 2>/dev/null || exit 1
fi
mkdir -p "$PREFIX"
for f in .debs/*.deb; do dpkg -x "$f" "$PREFIX"; done
# Boost's headers: the folders aobench reaches (fetch_gpu_debs.sh), or a whole libboost1.74-dev of an older fetch.
if [[ -f .debs/boost-headers.tar.xz ]]; then tar xJf .debs/boost-headers.tar.xz -C "$PREFIX"; fi
if [[ ! -f $PREFIX/usr/include/boost/version.hpp ]]; then
  echo "gpu_build: .debs/ has no Boost headers; re-run scripts/fetch_gpu_debs.sh and carry .debs again" >&2
  return 1 2>/dev/null || exit 1
fi
LIBDIR="$PREFIX/usr/lib/x86_64-linux-gnu"
# The .pc files say prefix=/usr; point them at the private prefix. A .debs/ from before a package was added lacks
# its .pc: say so here rather than let CMake find (or miss) the machine's own copy.
for pc in libpcre2-8 liblzma libzstd; do
  if [[ ! -f "$LIBDIR/pkgconfig/$pc.pc" ]]; then
    echo "gpu_build: .debs/ has no $pc development package; re-run scripts/fetch_gpu_debs.sh and carry .debs again" >&2
    return 1 2>/dev/null || exit 1
  fi
done
sed -i -e "s|^prefix=.*|prefix=$PREFIX/usr|" -e "s|^\(exec_prefix\|libdir\|includedir\)=/usr|\1=$PREFIX/usr|" \
  "$LIBDIR/pkgconfig/libpcre2-8.pc" "$LIBDIR/pkgconfig/liblzma.pc" "$LIBDIR/pkgconfig/libzstd.pc"
# liblzma-dev's liblzma.so links to one exact runtime version (/lib/.../liblzma.so.5.4.1), libzstd-dev's likewise;
# point them at this machine's own liblzma5 / libzstd1 (every Debian / Ubuntu system has them), whatever their version.
for lib in liblzma.so.5 libzstd.so.1; do
  for so in /lib/x86_64-linux-gnu/$lib /usr/lib/x86_64-linux-gnu/$lib; do
    if [[ -e "$so" ]]; then ln -sf "$so" "$LIBDIR/${lib%.*}"; break; fi
  done
done
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# CMake looks for nvcc on PATH; the CUDA toolkit's usual home is /usr/local/cuda.
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then export CUDACXX=/usr/local/cuda/bin/nvcc; fi
# -Werror is for the project's compiler (Debian 12's gcc 12); the GPU machine's gcc 13 warns inside
# libstdc++ (-Warray-bounds false positives), so warnings stay warnings here.
TORCH_PREFIX=$(python3 -c "import torch; print(torch.utils.cmake_prefix_path)")
cmake -S . -B "${AOBENCH_BUILD_DIR:-build}" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython3_EXECUTABLE="$(command -v python3)" \
  -DBoost_ROOT="$PREFIX/usr" -DBoost_NO_SYSTEM_PATHS=ON \
  -DCMAKE_PREFIX_PATH="$PREFIX/usr;$TORCH_PREFIX" \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DAOBENCH_WERROR=OFF ${AOBENCH_CMAKE_ARGS:-} > "${AOBENCH_BUILD_LOG:-/tmp/aobench_cmake.log}" 2>&1 \
  || { cat "${AOBENCH_BUILD_LOG:-/tmp/aobench_cmake.log}"; return 1 2>/dev/null || exit 1; }
grep "aobench:" "${AOBENCH_BUILD_LOG:-/tmp/aobench_cmake.log}" || true   # CUDA kernels / NCCL on or off
cmake --build "${AOBENCH_BUILD_DIR:-build}" -j "${AOBENCH_JOBS:-16}" ${AOBENCH_TARGETS:+--target $AOBENCH_TARGETS}
