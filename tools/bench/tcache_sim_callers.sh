#!/usr/bin/env bash
# Names the callers tcache_sim.c printed (its "missed N: chunk C at 0xA 0xB 0xC" lines, on stdin) with addr2line
# against the executable that ran: one line each, "N chunk C: f0 <- f1 <- f2".
#   TCACHE_SIM_CALLERS=1 LD_PRELOAD=/tmp/tcache_sim.so kvshard replay t.jsonl 2> sim.txt
#   tools/bench/tcache_sim_callers.sh kvshard < sim.txt
set -euo pipefail
exe=${1:?usage: tools/bench/tcache_sim_callers.sh EXECUTABLE < tcache_sim output}
grep -E '^  missed [0-9]+: chunk' | while read -r _ count _ chunk _ a b c; do
  names=$(addr2line -f -C -e "$exe" "$a" "$b" "$c" | awk 'NR % 2 == 1' | sed -E 's/\(.*//' | cut -c1-70 | paste -sd'|')
  echo "${count%:} chunk $chunk: ${names//|/ <- }"
done
