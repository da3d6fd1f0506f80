#!/usr/bin/env bash
# Around the whole suite (CTest runs it first and last): "snapshot FILE" lists the user's own AMP Workbench
# folders (run store, cache, settings) with sizes and modification times; "check FILE" fails, naming what
# changed, if a test wrote into them.
set -euo pipefail
mode=$1 state=$2
list() {
  for dir in "${XDG_DATA_HOME:-$HOME/.local/share}/ampwb" "${XDG_CACHE_HOME:-$HOME/.cache}/ampwb" \
             "${XDG_CONFIG_HOME:-$HOME/.config}/ampwb"; do
    if [ -e "$dir" ]; then find "$dir" -printf '%p %s %T@\n' | sort; else echo "$dir absent"; fi
  done
}
case $mode in
  snapshot) list > "$state" ;;
  check)
    if ! diff -u "$state" <(list); then
      echo "home_guard: the tests changed the user's AMP Workbench folders (lines above: - before, + after)" >&2
      exit 1
    fi
    echo "home_guard: the user's AMP Workbench folders are untouched" ;;
  *) echo "usage: $0 snapshot|check FILE" >&2; exit 2 ;;
esac
