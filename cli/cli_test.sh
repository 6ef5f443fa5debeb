#!/usr/bin/env bash
# CLI contract tests: JSON shapes, exit codes (0 ok, 2 bad input) and the one-line error format.
set -u
KV="${TEST_SRCDIR}/kvshard/cli/kvshard"
pass=0; fail=0
check() {  # name, expected-rc, expected-substring-in-output, command...
  local name=$1 want_rc=$2 want=$3; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ $rc -ne $want_rc || "$out" != *"$want"* ]]; then
    echo "FAIL $name: rc=$rc (want $want_rc) output: $out"; fail=$((fail+1))
  else
    pass=$((pass+1))
  fi
}
check place_json 0 '"filter_local": [' "$KV" place --shard-size 4 --page-size 16 --rank 1 --locs 0,17,80,359 --json
check place_json_values 0 '"owner": [
    0,
    1,
    1,
    2
  ]' "$KV" place --shard-size 4 --page-size 16 --rank 1 --locs 0,17,80,359 --json
check place_table 0 'filter_local(rank 1): [1,16]' "$KV" place --rank 1 --locs 0,17,80
check place_file 0 'filter_local(rank 0): [0,16]' "$KV" place --locs-file "${TEST_SRCDIR}/kvshard/cli/testdata/locs.txt"
check help 0 '--shard-size' "$KV" place --help
check help_default 0 '(=4)' "$KV" place --help
check top_help 0 'place' "$KV" --help
check zero_shard 2 'kvshard: error: --shard-size: must be in [1, 65536], got 0' "$KV" place --shard-size 0 --locs 1
check neg_page 2 'kvshard: error: --page-size:' "$KV" place --page-size -1 --locs 1
check bad_rank 2 'kvshard: error: --rank: must be in [0, 4), got 9' "$KV" place --rank 9 --locs 1
check bad_loc 2 "kvshard: error: --locs[1]: not an integer: 'x'" "$KV" place --locs 1,x
check neg_loc 2 'kvshard: error: --locs[1]: must be in [0, 2^48), got -3' "$KV" place --locs 1,-3
check overflow 2 'kvshard: error: --locs[0]: integer out of range' "$KV" place --locs 99999999999999999999
check huge_loc 2 'kvshard: error: --locs[0]: must be in [0, 2^48)' "$KV" place --locs 9223372036854775807
check unknown_flag 2 'kvshard: error:' "$KV" place --locs 1 --bogus
check unknown_cmd 2 "kvshard: error: unknown command 'nope'" "$KV" nope
check missing_locs 2 'kvshard: error: --locs: required' "$KV" place
check bad_backend 2 'kvshard: error: --backend: must be ref, gpu or diff' "$KV" place --locs 1 --backend x
# Every error is exactly one line.
lines=$("$KV" place --rank 9 --locs 1 2>&1 >/dev/null | wc -l)
if [[ $lines -ne 1 ]]; then echo "FAIL one_line: $lines lines"; fail=$((fail+1)); else pass=$((pass+1)); fi
echo "cli_test: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
