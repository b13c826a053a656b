#!/usr/bin/env bash
# Downloads (does not install) the Debian packages the offline GPU machine needs into .debs/ (~11 MB):
# Boost 1.74 headers + Program_options, PCRE2, liblzma and libzstd headers (the liblzma5 and libzstd1 runtimes are on
# every Debian / Ubuntu system: dpkg needs them; scripts/gpu_build.sh links against the machine's own). Carry .debs to the GPU machine; scripts/gpu_build.sh unpacks them.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .debs && cd .debs
apt-get download libboost1.74-dev libboost-program-options1.74.0 libboost-program-options1.74-dev \
  libpcre2-dev libpcre2-8-0 liblzma-dev libzstd-dev
ls -la
