#!/usr/bin/env bash
# Determinism through the built binary (docs/RELIABILITY.md, "Determinism"): every command below runs twice and
# must print the same bytes (and exit status); the integer-only outputs must also match the SHA-256 checked in
# here, so another machine, compiler or build config (the asan/ubsan runs) gives the same bytes. simulate's
# reports hold floating point (and its plots libm's pow/log10), so they are checked run to run and across
# thread counts only. A changed golden prints the new digest: update the table when the change is intended.
set -u
KV="${TEST_SRCDIR}/kvshard/cli/kvshard"
DATA="${TEST_SRCDIR}/kvshard/testdata"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
head -n 300 "$DATA/workloads/mooncake_conversation_trace.jsonl" > "$TMP/w.jsonl"
fail=0

# name | golden SHA-256 of stdout, or "-" (run to run only) | kvshard arguments (@TMP@, @DATA@ substituted).
COMMANDS=(
  "gen_s7|46e94d2d8bc5019208c61276314deb3b211ed2c25576060aac7124a70b86477f|gen --seed 7 --records 400 --layers 1"
  "gen_s7_edge|0760806e4be8b1fcdd98d1d297f7efaa309b4317c8e67116e20ec0cb02e9e51b|gen --seed 7 --records 400 --edge-heavy --need-sort --shard-size 3 --page-size 1 --cp-size 5"
  "gen_s8|db2d46db95935fa7e1fb1133638716a26729458ecc2e1e0c8ebc13bfbb8e7848|gen --seed 8 --records 400 --layers 1"
  "replay_s7|673812aa5382b2f2a2bf72d21d80b431a3e6b389e4d182e1e11ca019981296c2|replay @TMP@/gen_s7.1 --json"
  "split|cca5fe18c750cd550229d945f1f9c913a00d61e28d3c83c469b3a580967b01fa|split --cp-size 4 --cp-rank 2 --page-size 16 --extend-lens 100,7,64,33,1 --prefix-lens 0,16,32,48,0 --json"
  "rerange|eeb65ff36a122035cca9ceb40a156e9ee48543ed1f936d7a1a59765a0dba0e66|rerange --cp-size 4 --page-size 16 --extend-lens 100,7,64,33,1 --prefix-lens 0,16,32,48,0 --json"
  "gather_plan|be9517cce633fb20db1457f47f11e982e4125e563e9d483dc16d0d60858fca61|gather-plan --batch @DATA@/gather_plan/spec3_batch_n4_ps16.json --translate 0,336,400,1000 --json"
  "simulate|-|simulate @TMP@/w.jsonl --quiet --json --shard-size 4 --page-size 16 --cp-size 2 --cache-tokens 2000000"
  "sweep_t1|-|simulate @TMP@/w.jsonl --quiet --json --sweep shard-size=2,8 --sweep page-size=16,64 --threads 1"
  "sweep_t3|-|simulate @TMP@/w.jsonl --quiet --json --sweep shard-size=2,8 --sweep page-size=16,64 --threads 3"
)

for entry in "${COMMANDS[@]}"; do
  IFS='|' read -r name golden line <<< "$entry"
  line="${line//@TMP@/$TMP}"
  line="${line//@DATA@/$DATA}"
  read -r -a args <<< "$line"
  for i in 1 2; do
    "$KV" "${args[@]}" > "$TMP/$name.$i" 2> "$TMP/$name.err$i"
    echo "exit $?" >> "$TMP/$name.err$i"
  done
  if ! grep -q '^exit 0$' "$TMP/$name.err1"; then
    echo "FAIL $name: kvshard $line: $(head -c 300 "$TMP/$name.err1")"; fail=1; continue
  fi
  if ! cmp -s "$TMP/$name.1" "$TMP/$name.2" || ! cmp -s "$TMP/$name.err1" "$TMP/$name.err2"; then
    echo "FAIL $name: two runs of kvshard $line differ"; cmp "$TMP/$name.1" "$TMP/$name.2"; fail=1; continue
  fi
  digest=$(sha256sum < "$TMP/$name.1" | cut -d' ' -f1)
  if [[ "$golden" != "-" && "$digest" != "$golden" ]]; then
    echo "FAIL $name: kvshard $line: SHA-256 $digest, golden $golden (update the table if the change is intended)"
    fail=1; continue
  fi
  echo "ok $name ($(wc -c < "$TMP/$name.1") bytes, sha256 $digest)"
done

# Another seed, another trace; the sweep's rows do not depend on the thread count.
cmp -s "$TMP/gen_s7.1" "$TMP/gen_s8.1" && { echo "FAIL: seeds 7 and 8 gave the same trace"; fail=1; }
cmp -s "$TMP/sweep_t1.1" "$TMP/sweep_t3.1" || { echo "FAIL: --threads 1 and --threads 3 print other rows"; fail=1; }
exit $fail
