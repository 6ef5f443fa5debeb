#!/usr/bin/env bash
# CLI contracts of `kvshard split` and `kvshard rerange`: goldens made by SGLang's seed-003 functions
# (testdata/cp/golden_commands.txt), required JSON keys, tables, exit codes and one-line errors with SGLang's tags.
# JSON is inspected with python3 (a listed build dependency, see tools/install_deps.sh).
set -u
KV="${TEST_SRCDIR}/kvshard/cli/kvshard"
TD="${TEST_SRCDIR}/kvshard/testdata/cp"
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }
check() {  # name, expected-rc, expected-substring-in-output, command...
  local name=$1 want_rc=$2 want=$3; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ $rc -ne $want_rc || "$out" != *"$want"* ]]; then bad "$name: rc=$rc (want $want_rc) output: $out"; else ok; fi
}
error_line() {  # name, expected-substring, command...: exit 2, exactly one stderr line, nothing on stdout
  local name=$1 want=$2; shift 2
  local err out rc
  out=$("$@" 2>/tmp/cp_cli_err.$$); rc=$?; err=$(cat /tmp/cp_cli_err.$$); rm -f /tmp/cp_cli_err.$$
  local lines; lines=$(printf '%s\n' "$err" | wc -l)
  if [[ $rc -ne 2 || -n "$out" || $lines -ne 1 || "$err" != "kvshard: error: "*"$want"* ]]; then
    bad "$name: rc=$rc lines=$lines stdout='$out' stderr='$err'"
  else
    ok
  fi
}

# Goldens: every key SGLang produced must match (the CLI may add keys).
while IFS='|' read -r golden args; do
  [[ -z "$golden" || "$golden" == \#* ]] && continue
  # shellcheck disable=SC2086
  got=$("$KV" $args) || { bad "golden $golden: exit $?"; continue; }
  diff_out=$(python3 -c 'import json,sys; w=json.load(open(sys.argv[1])); g=json.loads(sys.stdin.read()); print([k for k in w if w[k] != g.get(k)])' "$TD/$golden" <<< "$got")
  if [[ "$diff_out" != "[]" ]]; then bad "golden $golden: keys differ: $diff_out"; else ok; fi
done < "$TD/golden_commands.txt"

# Required JSON contracts.
plan=$("$KV" split --cp-size 2 --cp-rank 1 --page-size 4 --extend-lens 5,37,3 --prefix-lens 0,16,8 --json)
keys="batch_size page_size cp_size cp_rank request_token_offsets request_padded_token_offsets request_page_offsets request_extend_lens request_prefix_lens request_padded_pages request_padded_tokens request_padding_tokens request_split_infos request_split_lists request_zigzag_indices request_segment_page_starts request_segment_page_ends request_rank_local_tokens request_rank_local_offsets request_kv_len_prev request_kv_len_next request_actual_seq_q_prev request_actual_seq_q_next request_last_token_owner request_last_token_local_offset output_collect_mode flat_split_list flat_zigzag_index flat_segment_request_ids flat_segment_offsets compute_padding_enabled request_valid_split_lists request_valid_segment_page_starts request_valid_segment_page_ends request_valid_padded_pages request_valid_padded_tokens request_valid_padding_tokens request_valid_rank_local_tokens request_valid_rank_local_offsets request_valid_actual_seq_q_prev request_valid_actual_seq_q_next request_valid_seq_q_prev request_valid_seq_q_next request_valid_query_row_spans request_compute_split_lists request_compute_segment_page_starts request_compute_segment_page_ends request_compute_padded_pages request_compute_padded_tokens request_compute_padding_tokens request_compute_padded_token_offsets request_compute_rank_local_tokens request_compute_rank_local_offsets request_compute_actual_seq_q_prev request_compute_actual_seq_q_next request_compute_seq_q_prev request_compute_seq_q_next"
missing=$(python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print([k for k in sys.argv[1].split() if k not in j])' "$keys" <<< "$plan")
if [[ "$missing" != "[]" ]]; then bad "split json: missing $missing"; else ok; fi
field() { python3 -c 'import json,sys; print(json.dumps(eval("j" + sys.argv[1], {"j": json.loads(sys.stdin.read())}), separators=(",", ":"), sort_keys=True))' "$1"; }
check split_infos_objects 0 '"extend_padding_tokens":3' field '["request_split_infos"][1]' <<< "$plan"
check row_spans_arrays 0 '[[0,12],[12,8]]' field '["request_valid_query_row_spans"][1]' <<< "$plan"
check collect_mode 0 '"narrow_last_token"' field '["output_collect_mode"]' <<< "$plan"
rr=$("$KV" rerange --cp-size 2 --page-size 4 --extend-lens 5,37,3 --prefix-lens 0,16,8 --json)
check rerange_max 0 '28' field '["max_rank_token"]' <<< "$rr"
check rerange_per_rank 0 '[24,21]' field '["per_rank_tokens"]' <<< "$rr"
check rerange_source_rows 0 '[0,1,2,3,28,4,5,' field '["source_rows"]' <<< "$rr"
check rerange_one_request 0 '"source_rows": [' "$KV" rerange --cp-size 4 --page-size 16 --extend-lens 100 --json
check rr_json 0 '"bs_idx": [' "$KV" split --mode round-robin --cp-size 2 --cp-rank 1 --extend-lens 5,3,1 --json
check tb_json 0 '"split_list": [' "$KV" split --mode token-balanced --cp-size 2 --total-len 10 --json

# Tables without --json.
check split_table 0 'last token: rank 0 local offset 16' "$KV" split --cp-size 2 --cp-rank 1 --page-size 4 --extend-lens 5,37,3 --prefix-lens 0,16,8
check split_table_pages 0 '[7,10)' "$KV" split --cp-size 2 --cp-rank 1 --page-size 4 --extend-lens 5,37,3 --prefix-lens 0,16,8
check rerange_table 0 '[4,5) <- [28,29)' "$KV" rerange --cp-size 2 --page-size 4 --extend-lens 5,37,3 --prefix-lens 0,16,8
check rr_table 0 'q_lens=[2,2]' "$KV" split --mode round-robin --cp-size 2 --cp-rank 1 --extend-lens 5,3,1
check tb_table 0 'split_list=[3,3,2,2]' "$KV" split --mode token-balanced --cp-size 2 --total-len 10
check split_help 0 '--extend-lens' "$KV" split --help
check rerange_help 0 '--page-size' "$KV" rerange --help
check top_help 0 'rerange' "$KV" --help

# Errors: exit 2, one line, SGLang's reason tag where one exists.
error_line empty_extend '[CP_SHARED_KV_FAIL_FAST][batch_gt1_empty_extend] ' "$KV" split --cp-size 2 --page-size 4 --extend-lens 5,0
error_line misaligned '[CP_SHARED_KV_FAIL_FAST][batch_gt1_non_page_aligned_prefix] ' "$KV" split --cp-size 2 --page-size 4 --extend-lens 5 --prefix-lens 3
error_line fallback '[CP_SHARED_KV_FAIL_FAST][batch_gt1_page_split_fallback] ' "$KV" split --cp-size 2 --page-size 1 --extend-lens 5
error_line rerange_fallback '[CP_SHARED_KV_FAIL_FAST][batch_gt1_page_split_fallback] ' "$KV" rerange --cp-size 2 --page-size 1 --extend-lens 5
error_line rerange_empty '[CP_SHARED_KV_FAIL_FAST][batch_gt1_empty_extend] ' "$KV" rerange --cp-size 2 --page-size 4 --extend-lens 0
error_line bad_cp '--cp-size: must be in [1, 65536], got 0' "$KV" split --cp-size 0 --page-size 4 --extend-lens 5
error_line bad_rank '--cp-rank: must be in [0, 2), got 2' "$KV" split --cp-size 2 --cp-rank 2 --page-size 4 --extend-lens 5
error_line bad_ps '--page-size: must be in [1, 2^20], got 0' "$KV" split --cp-size 2 --page-size 0 --extend-lens 5
error_line neg_prefix '--prefix-lens[0]: must be non-negative, got -4' "$KV" split --cp-size 2 --page-size 4 --extend-lens 5 --prefix-lens -4
error_line len_mismatch '--prefix-lens: extend_lens and prefix_lens must have the same length' "$KV" split --cp-size 2 --page-size 4 --extend-lens 5,6 --prefix-lens 0
error_line no_requests '--extend-lens: the batch needs at least one request' "$KV" split --cp-size 2 --page-size 4 --extend-lens ''
error_line huge '--extend-lens[0]: must be at most 2^48' "$KV" split --cp-size 2 --page-size 4 --extend-lens 999999999999999999
error_line overflow '--extend-lens[0]: integer out of range' "$KV" split --cp-size 2 --page-size 4 --extend-lens 99999999999999999999
error_line not_int "--extend-lens[1]: not an integer: 'x'" "$KV" split --cp-size 2 --page-size 4 --extend-lens 5,x
error_line missing '--cp-size: required' "$KV" split --page-size 4 --extend-lens 5
error_line missing_ps '--page-size: required' "$KV" rerange --cp-size 2 --extend-lens 5
error_line bad_mode "--mode: must be in-seq, round-robin, token-balanced or owners, got 'zig'" "$KV" split --mode zig --cp-size 2
error_line rr_neg '--extend-lens[1]: must be in [0, 2^48], got -1' "$KV" split --mode round-robin --cp-size 2 --extend-lens 1,-1
error_line rr_rank '--cp-rank: must be in [0, 2), got 5' "$KV" split --mode round-robin --cp-size 2 --cp-rank 5 --extend-lens 1
error_line tb_neg '--total-len: must be in [0, 2^48], got -1' "$KV" split --mode token-balanced --cp-size 2 --total-len -1
error_line unknown_flag 'split: ' "$KV" split --cp-size 2 --bogus 1
echo "cp_cli_test: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
