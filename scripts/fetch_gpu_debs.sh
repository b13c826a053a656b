#!/usr/bin/env bash
# Downloads (does not install) what the offline GPU machine needs to build into .debs/ (~4 MB): Program_options,
# PCRE2, liblzma and libzstd headers as Debian packages (the liblzma5 and libzstd1 runtimes are on every Debian /
# Ubuntu system: dpkg needs them; scripts/gpu_build.sh links against the machine's own), and of Boost 1.74's
# headers only the folders that the three Boost headers aobench includes reach (boost-headers.tar.xz, ≈ 2 MB
# against the 9.5 MB of libboost1.74-dev): a device call carries 64 MiB in all, the tree and the training text
# included. Carry .debs to the GPU machine; scripts/gpu_build.sh unpacks them.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .debs && rm -f .debs/*.deb .debs/boost-headers.tar.xz
(cd .debs && apt-get download libboost1.74-dev libboost-program-options1.74.0 libboost-program-options1.74-dev \
  libpcre2-dev libpcre2-8-0 liblzma-dev libzstd-dev)
# The folders under boost/ that the project's Boost includes reach (g++ -M against the package's own headers),
# whole, so that another compiler's configuration headers are there too.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dpkg -x .debs/libboost1.74-dev_*.deb "$tmp"
inc=$tmp/usr/include
mapfile -t wanted < <(grep -rhoE '#include <boost/[^>]+>' core datasets metrics reports harness plugins | sort -u)
printf '#define BOOST_DLL_USE_STD_FS\n%s\n' "${wanted[@]}" > "$tmp/all.cpp"
mapfile -t top < <(g++ -std=gnu++17 -I"$inc" -M "$tmp/all.cpp" | tr ' \\' '\n\n' | grep -oE "^$inc/boost/[^/]+" |
  sed "s|^$inc/||" | sort -u)
(( ${#top[@]} > 0 )) || { echo "fetch_gpu_debs: found no Boost header the project includes" >&2; exit 1; }
cm=usr/lib/x86_64-linux-gnu/cmake  # find_package(Boost) reads BoostConfig.cmake and boost_headers-config.cmake
tar cJf .debs/boost-headers.tar.xz -C "$tmp" "${top[@]/#/usr/include/}" "$cm/Boost-1.74.0" \
  "$cm/BoostDetectToolset-1.74.0.cmake" "$cm/boost_headers-1.74.0"
rm .debs/libboost1.74-dev_*.deb
echo "fetch_gpu_debs: boost-headers.tar.xz holds ${#top[@]} entries of boost/ (from ${#wanted[@]} includes)"
ls -la .debs
