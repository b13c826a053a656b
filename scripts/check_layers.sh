#!/usr/bin/env bash
# The layers' include rule (CMakeLists.txt: core → datasets → metrics → reports → harness; plugins see core
# and plugins/common): a file may include project headers only from its own layer or the layers below.
# The link (-Wl,--no-undefined) catches calls that run back up; this catches header-only ones. Run by ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A allowed=(
  [core]="core"
  [datasets]="core datasets"
  [metrics]="core datasets metrics"
  [reports]="core datasets metrics reports"
  [plugins]="core plugins"
)
status=0
for layer in "${!allowed[@]}"; do
  while IFS= read -r line; do
    file=${line%%:*}
    header=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"${line#*:}")
    top=${header%%/*}
    [[ "$header" == */* ]] || continue            # "kernel.h" beside the file
    [[ " ${allowed[$layer]} " == *" $top "* ]] && continue
    # A plugin's own folder, or plugins/common, only: never another plugin's.
    echo "layers: $file includes \"$header\", above its layer '$layer' (allowed: ${allowed[$layer]})" >&2
    status=1
  done < <(git grep -n '#include "' -- "$layer/" | sed -E 's/^([^:]+):[0-9]+:/\1:/')
done
# Plugins may include plugins/common and their own folder, not another plugin's.
while IFS= read -r line; do
  file=${line%%:*}
  header=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"${line#*:}")
  own=$(cut -d/ -f2 <<<"$file")
  other=$(cut -d/ -f2 <<<"$header")
  if [[ "$other" != common && "$other" != "$own" && "$file" != plugins/common/* ]]; then
    echo "layers: $file includes \"$header\" from another plugin; share it through plugins/common" >&2
    status=1
  fi
done < <(git grep -n '#include "plugins/' -- 'plugins/' | sed -E 's/^([^:]+):[0-9]+:/\1:/')
[[ $status == 0 ]] && echo "layers: every include runs down"
exit $status
