#!/usr/bin/env bash
# Memory limits that hold under an address-space cap (ulimit -v 768 MiB, --max-memory 256 MiB): every replay record
# kind whose answer a length can make large, and every command that sizes a table from its input, is refused with
# one line (exit 2) before it allocates; inputs just under the budget run to the end inside the cap; memory the
# system refuses below the estimates is one line, exit 3 (never std::terminate, never exit 134); threads the system
# cannot create are done without.
set -u
KV="${TEST_SRCDIR}/kvshard/cli/kvshard"
TD="${TEST_SRCDIR}/kvshard/testdata"
T="${TEST_TMPDIR:-/tmp}"
CAP=786432  # KiB
BUDGET=268435456
pass=0; fail=0
# AddressSanitizer reserves ~15 TB of address space at start, so no ulimit -v can apply to an ASan build: there the
# cases run without the cap (the refusals and the runs still count), and the two that need the cap say they skip.
asan=""
[[ -n "${ASAN_OPTIONS:-}" ]] && asan=1
capped() {  # name, expected-rc, expected-substring, command...: run under the cap
  local name=$1 want_rc=$2 want=$3; shift 3
  local out rc lines
  if [[ -n $asan ]]; then
    out=$("$@" 2>&1); rc=$?
  else
    out=$(ulimit -v "$CAP"; "$@" 2>&1); rc=$?
  fi
  lines=$(printf '%s\n' "$out" | grep -c 'kvshard: error' || true)
  if [[ $rc -ne $want_rc || "$out" != *"$want"* ]] || { ((want_rc != 0)) && ((lines != 1)); }; then
    echo "FAIL $name: rc=$rc (want $want_rc, '$want'): $(printf '%s' "$out" | head -c 400)"; fail=$((fail+1))
  else
    pass=$((pass+1))
  fi
}
trace() {  # file, record: a header-only trace with one record
  printf '{"kvshard_trace":1}\n%s\n' "$2" > "$T/$1.jsonl"
}
ones=$(printf '1,%.0s' $(seq 40)); ones=${ones%,}
over="over --max-memory 256 MiB"

# Every sized record kind, refused with its field named.
trace split '{"op":"split","cp_size":65536,"cp_rank":0,"page_size":1,"extend_lens":['"$ones"']}'
trace split_rr '{"op":"split","mode":"round-robin","cp_size":2,"cp_rank":0,"extend_lens":[100000000000]}'
trace rerange '{"op":"rerange","cp_size":2,"page_size":1024,"extend_lens":[100000000000]}'
trace gather_plan "{\"op\":\"gather_plan\",\"batch\":$(cat "$TD/bad_inputs/batch_huge_rows.json")}"
trace page_owners '{"op":"page_owners","cp_size":2,"page_size":1,"extend_lens":[100000000000]}'
trace direct_write '{"op":"cp_direct_write","cp_size":2,"cp_rank":0,"page_size":1,"extend_lens":[100000000000],"out_cache_loc":[1]}'
trace split_rows '{"op":"cp_split_rows","cp_size":65536,"page_size":1,"extend_lens":['"$ones"'],"rows":[1]}'
trace valid_rows '{"op":"cp_valid_rows","cp_size":65536,"page_size":1,"extend_lens":['"$ones"'],"rows":[1]}'
trace last_tokens '{"op":"cp_last_tokens","cp_size":65536,"page_size":1,"extend_lens":['"$ones"'],"rows":[1]}'
trace pad_request '{"op":"cp_pad_request","rows":[1],"target_len":100000000000}'
capped record_split 2 "line 2: extend_lens: the split plan and its JSON would need" "$KV" replay "$T/split.jsonl" --max-memory $BUDGET
capped record_split_rr 2 "line 2: extend_lens: the round-robin split would need" "$KV" replay "$T/split_rr.jsonl" --max-memory $BUDGET
capped record_rerange 2 "line 2: extend_lens: the rerange source rows would need" "$KV" replay "$T/rerange.jsonl" --max-memory $BUDGET
capped record_gather_plan 2 "line 2: batch: the gather plan would need" "$KV" replay "$T/gather_plan.jsonl" --max-memory $BUDGET
capped record_page_owners 2 "line 2: extend_lens: the page owner plan would need" "$KV" replay "$T/page_owners.jsonl" --max-memory $BUDGET
capped record_direct_write 2 "line 2: extend_lens: the page owner plan would need" "$KV" replay "$T/direct_write.jsonl" --max-memory $BUDGET
capped record_split_rows 2 "line 2: extend_lens: the split plan would need" "$KV" replay "$T/split_rows.jsonl" --max-memory $BUDGET
capped record_valid_rows 2 "line 2: extend_lens: the split plan would need" "$KV" replay "$T/valid_rows.jsonl" --max-memory $BUDGET
capped record_last_tokens 2 "line 2: extend_lens: the split plan would need" "$KV" replay "$T/last_tokens.jsonl" --max-memory $BUDGET
capped record_pad_request 2 "line 2: target_len: the padded rows would need" "$KV" replay "$T/pad_request.jsonl" --max-memory $BUDGET
# A record whose expect names an error is still refused as too large (exit 2), not compared.
trace rerange_expect '{"op":"rerange","cp_size":2,"page_size":1024,"extend_lens":[100000000000],"expect":{"error":"x"}}'
capped record_expect_error 2 "$over" "$KV" replay "$T/rerange_expect.jsonl" --max-memory $BUDGET

# Every command that sizes a table from its input, through the same figures.
capped cmd_split 2 "--extend-lens: the split plan would need" "$KV" split --cp-size 65536 --page-size 1 --extend-lens "$ones" --max-memory $BUDGET
capped cmd_split_rr 2 "--extend-lens: the round-robin split would need" "$KV" split --mode round-robin --cp-size 2 --extend-lens 100000000000 --max-memory $BUDGET
capped cmd_split_owners 2 "--extend-lens: the page owner plan would need" "$KV" split --mode owners --cp-size 2 --page-size 1 --extend-lens 100000000000 --max-memory $BUDGET
capped cmd_rerange 2 "--extend-lens: the rerange plan would need" "$KV" rerange --cp-size 65536 --page-size 1 --extend-lens "$ones" --max-memory $BUDGET
capped cmd_gather_plan 2 "--batch: the gather plan would need" "$KV" gather-plan --batch "$TD/bad_inputs/batch_huge_rows.json" --max-memory $BUDGET
seq 1 3000000 > "$T/slots.txt"
capped cmd_place 2 "--locs-file: the placement of the slots would need" "$KV" place --locs-file "$T/slots.txt" --max-memory 100000000
capped cmd_gen 2 "--layers: the generator's allocator and pools would need" "$KV" gen --layers 4096 --row-words 4096 --pages-per-rank 1000 --max-memory $BUDGET
capped cmd_simulate 2 "--cache-tokens: the simulated pool would need" "$KV" simulate "$TD/bad_inputs/workload_ok.jsonl" --shard-size 1 --page-size 1 --cache-tokens 4000000 --max-memory $BUDGET

# Just under the budget, inside the cap: the estimates are upper bounds (3 M rerange rows: 192 MB estimated).
trace rerange_fits '{"op":"rerange","cp_size":2,"page_size":1024,"extend_lens":[3000000]}'
capped fits_rerange 0 "replayed 1 records" "$KV" replay "$T/rerange_fits.jsonl" --max-memory $BUDGET
capped fits_split_rr 0 "round-robin split" "$KV" split --mode round-robin --cp-size 2 --extend-lens 5000000 --max-memory $BUDGET

# Under the default 4 GiB budget but past the cap: one line, exit 3 (61 M rerange rows need about 3.4 GB).
trace rerange_oom '{"op":"rerange","cp_size":2,"page_size":1024,"extend_lens":[61440000]}'
if [[ -n $asan ]]; then
  echo "SKIPPED: out_of_memory and sweep_threads need ulimit -v, which an AddressSanitizer build cannot run under"
else
capped out_of_memory 3 "kvshard: error: out of memory: the system refused an allocation" "$KV" replay "$T/rerange_oom.jsonl"

# Threads the cap leaves no stack for: the sweep runs on fewer, says so, and succeeds.
CAP=400000 capped sweep_threads 0 "threads could be created; the sweep ran on" "$KV" simulate "$TD/bad_inputs/workload_ok.jsonl" \
  --sweep page-size=1,2,4,8,16,32,64,128 --sweep shard-size=1,2,4,8,16,32,64,128 --threads 1024 --quiet
fi

echo "memory_cap_test: $pass passed, $fail failed"
((fail == 0))
