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
check place_file 0 'filter_local(rank 0): [0,16]' "$KV" place --locs-file "${TEST_SRCDIR}/kvshard/testdata/placement/token_slots.txt"
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
check place_backend_nogpu 3 'kvshard: error: --backend diff:' "$KV" place --locs 1 --backend diff
check bad_backend 2 'kvshard: error: --backend: must be ref, gpu or diff' "$KV" place --locs 1 --backend x
# Standard output that cannot be written (a full disk, a closed descriptor) is an error, exit 3, for every kind of
# run: --help, --version, a command's report; a closed descriptor nothing was written to is not.
check stdout_full_help 3 'kvshard: error: standard output: write failed: No space left on device' bash -c '"$0" --help >/dev/full' "$KV"
check stdout_full_version 3 'standard output: write failed' bash -c '"$0" --version >/dev/full' "$KV"
check stdout_full_cmd_help 3 'standard output: write failed' bash -c '"$0" place --help >/dev/full' "$KV"
check stdout_full_report 3 'standard output: write failed: No space left on device' bash -c '"$0" place --locs 1 --json >/dev/full' "$KV"
check stdout_closed_report 3 'standard output: write failed: Bad file descriptor' bash -c '"$0" place --locs 1 >&-' "$KV"
check stdout_full_bad_input 2 "kvshard: error: --locs[0]: not an integer: 'x'" bash -c '"$0" place --locs x >/dev/full' "$KV"
# Every error is exactly one line.
lines=$("$KV" place --rank 9 --locs 1 2>&1 >/dev/null | wc -l)
if [[ $lines -ne 1 ]]; then echo "FAIL one_line: $lines lines"; fail=$((fail+1)); else pass=$((pass+1)); fi

# --- alloc and gather-plan (issue 3): contracts, goldens, exit codes -------------------------------
TD="${TEST_SRCDIR}/kvshard/testdata"
T="${TEST_TMPDIR:-/tmp}"
golden() {  # name, golden file, command...
  local name=$1 want=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ $rc -ne 0 ]] || ! diff <(printf '%s\n' "$out") "$want" >/dev/null; then
    echo "FAIL $name: rc=$rc, output differs from $(basename "$want"):"; diff <(printf '%s\n' "$out") "$want" | head -20
    fail=$((fail+1))
  else
    pass=$((pass+1))
  fi
}
golden alloc_golden_json "$TD/alloc/spec2_script_n4_ps16.golden.json" "$KV" alloc --script "$TD/alloc/spec2_script_n4_ps16.json" --json
golden alloc_golden_table "$TD/alloc/spec2_script_n4_ps16.golden.txt" "$KV" alloc --script "$TD/alloc/spec2_script_n4_ps16.json"
golden plan_golden_json "$TD/gather_plan/spec3_batch_n4_ps16.golden.json" \
  "$KV" gather-plan --batch "$TD/gather_plan/spec3_batch_n4_ps16.json" --translate 0,336,400,1000 --json
golden plan_golden_table "$TD/gather_plan/spec3_batch_n4_ps16.golden.txt" \
  "$KV" gather-plan --batch "$TD/gather_plan/spec3_batch_n4_ps16.json" --translate 0,336,400,1000
check alloc_keys 0 '"aggregate_free_size"' "$KV" alloc --script "$TD/alloc/spec2_script_n4_ps16.json" --json
check alloc_spec_pages 0 'pages [11,12,13,14,15,16,17,18,19]' "$KV" alloc --script "$TD/alloc/spec2_script_n4_ps16.json"
check plan_spec_sends 0 'rank 1:  2<-21/5  3<-pad' "$KV" gather-plan --batch "$TD/gather_plan/spec3_batch_n4_ps16.json"
check plan_no_translate_key 0 '"ranks"' "$KV" gather-plan --batch "$TD/gather_plan/spec3_batch_n4_ps16.json" --json
out=$("$KV" gather-plan --batch "$TD/gather_plan/spec3_batch_n4_ps16.json" --json)
if [[ "$out" == *scratch_rows* ]]; then echo "FAIL plan_scratch_rows_only_with_translate"; fail=$((fail+1)); else pass=$((pass+1)); fi
check alloc_help 0 '--script' "$KV" alloc --help
check plan_help 0 '--translate' "$KV" gather-plan --help
check top_help_lists 0 'gather-plan' "$KV" --help

# Malformed inputs: exit 2, one line naming the field.
batch() {  # file, request-json
  printf '{"shard_size":4,"page_size":16,"pages_per_rank":32,"max_prefix_tokens":%s,"chunk_tokens":%s,"requests":[%s]}' "$2" "$3" "$4" > "$T/$1"
}
CH='22,23,20,21,26,27,24,25,30,31,28,29,34,35,32,33'
batch cyc.json 4096 512 "{\"prefix_len\":112,\"seq_len\":251,\"pages\":[23,22,20,21,26,27,24,25,30,31,28,29,34,35,32,33]}"
check plan_cyclic 2 'kvshard: error: --batch: requests[0].pages: sharded prefix owners of request 0 are not cyclic' "$KV" gather-plan --batch "$T/cyc.json"
batch cap.json 64 512 "{\"prefix_len\":112,\"seq_len\":251,\"pages\":[$CH]}"
check plan_capacity 2 'exceeds the scratch prefix capacity (64)' "$KV" gather-plan --batch "$T/cap.json"
batch chunkcap.json 4096 16 "{\"prefix_len\":112,\"seq_len\":251,\"pages\":[$CH]}"
check plan_chunk_capacity 2 'kvshard: error: --batch: chunk_tokens: chunk (144 tokens) exceeds the scratch chunk capacity (16)' "$KV" gather-plan --batch "$T/chunkcap.json"
batch align.json 4096 512 "{\"prefix_len\":100,\"seq_len\":251,\"pages\":[$CH]}"
check plan_aligned 2 'physical-page-aligned prefixes' "$KV" gather-plan --batch "$T/align.json"
batch seq.json 4096 512 "{\"prefix_len\":0,\"seq_len\":0,\"pages\":[]},{\"prefix_len\":0,\"seq_len\":0,\"pages\":[]},{\"prefix_len\":32,\"seq_len\":16,\"pages\":[4]}"
check plan_seq_lt_prefix 2 'kvshard: error: --batch: requests[2].seq_len: must be >= prefix_len (32), got 16' "$KV" gather-plan --batch "$T/seq.json"
batch range.json 4096 512 "{\"prefix_len\":0,\"seq_len\":16,\"pages\":[132]}"
check plan_page_range 2 'kvshard: error: --batch: requests[0].pages[0]: page 132 out of pool range [4, 132)' "$KV" gather-plan --batch "$T/range.json"
batch neg.json 4096 512 "{\"prefix_len\":-16,\"seq_len\":16,\"pages\":[4]}"
check plan_negative 2 'kvshard: error: --batch: requests[0].prefix_len: must be in [0,' "$KV" gather-plan --batch "$T/neg.json"
batch big.json 4096 512 "{\"prefix_len\":0,\"seq_len\":99999999999999999999,\"pages\":[4]}"
check plan_overflow 2 'kvshard: error: --batch: requests[0].seq_len:' "$KV" gather-plan --batch "$T/big.json"
batch type.json 4096 512 "{\"prefix_len\":\"0\",\"seq_len\":16,\"pages\":[4]}"
check plan_type 2 'kvshard: error: --batch: requests[0].prefix_len: must be an integer' "$KV" gather-plan --batch "$T/type.json"
printf '{"shard_size":4}' > "$T/missing.json"
check plan_missing 2 'kvshard: error: --batch: page_size: missing' "$KV" gather-plan --batch "$T/missing.json"
sed 's/"pages_per_rank":32/"pool_pages_per_rank":33/' "$T/type.json" > "$T/renamed.json"
check plan_renamed_key 2 'kvshard: error: --batch: pool_pages_per_rank: renamed to pages_per_rank, which excludes the trash page (pages_per_rank = pool_pages_per_rank - 1)' "$KV" gather-plan --batch "$T/renamed.json"
printf '{"shard_size":' > "$T/broken.json"
check plan_not_json 2 'kvshard: error: --batch:' "$KV" gather-plan --batch "$T/broken.json"
check plan_no_file 2 'kvshard: error: --batch:' "$KV" gather-plan --batch "$T/does_not_exist.json"
check plan_no_flag 2 'kvshard: error: --batch: required' "$KV" gather-plan
check plan_bad_translate 2 "kvshard: error: --translate[1]: not an integer: 'x'" "$KV" gather-plan --batch "$TD/gather_plan/spec3_batch_n4_ps16.json" --translate 1,x
check plan_translate_range 2 'kvshard: error: --translate[0]: must be in [0, 2176)' "$KV" gather-plan --batch "$TD/gather_plan/spec3_batch_n4_ps16.json" --translate 2176
script() {  # file, ops-json
  printf '{"shard_size":4,"page_size":16,"pages_per_rank":32,"ops":[%s]}' "$2" > "$T/$1"
}
script a_align.json '{"op":"alloc","prefix_lens":[17],"seq_lens":[40],"rotation_bases":[0],"last_locs":[0]}'
check alloc_aligned 2 'kvshard: error: --script: ops[0].prefix_lens[0]: must be a page-aligned multiple' "$KV" alloc --script "$T/a_align.json"
script a_len.json '{"op":"alloc","prefix_lens":[0],"seq_lens":[40,3],"rotation_bases":[0],"last_locs":[0]}'
check alloc_lengths 2 'kvshard: error: --script: ops[0].seq_lens: has 2 entries, prefix_lens has 1' "$KV" alloc --script "$T/a_len.json"
script a_new.json '{"op":"alloc","prefix_lens":[16],"seq_lens":[16],"rotation_bases":[0],"last_locs":[15]}'
check alloc_no_new_pages 2 'kvshard: error: --script: ops[0].seq_lens[0]: must need at least one new page' "$KV" alloc --script "$T/a_new.json"
script a_base.json '{"op":"alloc","prefix_lens":[0],"seq_lens":[40],"rotation_bases":[7],"last_locs":[0]}'
check alloc_base 2 'kvshard: error: --script: ops[0].rotation_bases[0]: must be null or in [0, 4), got 7' "$KV" alloc --script "$T/a_base.json"
script a_free.json '{"op":"free","locs":[64]}'
check alloc_double_free 2 'kvshard: error: --script: ops[0].locs[0]: page 4 (slot 64) is not allocated' "$KV" alloc --script "$T/a_free.json"
script a_group.json '{"op":"free_group","frees":[[1],[-5]]}'
check alloc_group_negative 2 'kvshard: error: --script: ops[0].frees[1][0]: must be in [0,' "$KV" alloc --script "$T/a_group.json"
script a_op.json '{"op":"evict"}'
check alloc_bad_op 2 'kvshard: error: --script: ops[0].op: must be "alloc", "free" or "free_group", got "evict"' "$KV" alloc --script "$T/a_op.json"
script a_missing.json '{"op":"alloc","prefix_lens":[0],"seq_lens":[40],"rotation_bases":[0]}'
check alloc_missing 2 'kvshard: error: --script: ops[0].last_locs: missing' "$KV" alloc --script "$T/a_missing.json"
check alloc_no_flag 2 'kvshard: error: --script: required' "$KV" alloc
for f in cyc cap seq big; do
  lines=$("$KV" gather-plan --batch "$T/$f.json" 2>&1 >/dev/null | wc -l)
  if [[ $lines -ne 1 ]]; then echo "FAIL one_line_$f: $lines lines"; fail=$((fail+1)); else pass=$((pass+1)); fi
done
echo "cli_test: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
