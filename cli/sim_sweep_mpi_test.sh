#!/usr/bin/env bash
# kvshard simulate --sweep under mpirun: 2 processes print exactly the rows 1 process prints with threads (JSON
# and table), the MPI path is really taken (a missing libmpi fails), and a bad workload fails on every rank.
set -u
KV="${TEST_SRCDIR}/kvshard/cli/kvshard"
TRACE="${TEST_SRCDIR}/kvshard/testdata/workloads/mooncake_conversation_trace.jsonl"
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIPPED: mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev to run this test)"
  exit 0
fi
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
head -n 300 "$TRACE" > "$TMP/w.jsonl"
# Loopback only, shared-memory transport, no CUDA probing: the test needs no network.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_pml=ob1 OMPI_MCA_opal_cuda_support=0
# Under --config=asan the ranks skip LeakSanitizer: Open MPI's MPI_Init allocations are never freed (libmpi,
# ompi_op_base_op_select, ...); kvshard's own leaks are still checked by the single-process runs of this test.
MPIRUN=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun --allow-run-as-root --oversubscribe -np 2)
ARGS=(simulate "$TMP/w.jsonl" --quiet --sweep shard-size=4,8,16 --sweep page-size=16,64 --sweep cache-tokens=0,2000000)
fail=0
check() {  # name, command status, want status
  if [[ $2 -ne $3 ]]; then echo "FAIL $1: exit $2, want $3"; fail=1; else echo "ok $1"; fi
}

"$KV" "${ARGS[@]}" --json --threads 2 > "$TMP/threads.json"; check threads_json $? 0
"${MPIRUN[@]}" "$KV" "${ARGS[@]}" --json --threads 1 > "$TMP/mpi.json" 2> "$TMP/mpi.err"; check mpi_json $? 0
cat "$TMP/mpi.err"
if ! cmp -s "$TMP/threads.json" "$TMP/mpi.json"; then
  echo "FAIL: 2 MPI processes printed other rows than 2 threads"; diff "$TMP/threads.json" "$TMP/mpi.json" | head -40
  fail=1
fi
grep -q '"configurations": 12' "$TMP/mpi.json" || { echo "FAIL: want 12 configurations"; fail=1; }

"$KV" "${ARGS[@]}" --threads 3 > "$TMP/threads.txt"; check threads_table $? 0
"${MPIRUN[@]}" "$KV" "${ARGS[@]}" > "$TMP/mpi.txt" 2>/dev/null; check mpi_table $? 0
cmp -s "$TMP/threads.txt" "$TMP/mpi.txt" || { echo "FAIL: tables differ"; diff "$TMP/threads.txt" "$TMP/mpi.txt"; fail=1; }
[[ $(wc -l < "$TMP/mpi.txt") -eq 13 ]] || { echo "FAIL: want a header and 12 rows"; cat "$TMP/mpi.txt"; fail=1; }

# The MPI path is taken under mpirun: with no loadable libmpi every rank says so (exit 3).
KVSHARD_LIBMPI=/nonexistent/libmpi.so "${MPIRUN[@]}" -x KVSHARD_LIBMPI "$KV" "${ARGS[@]}" > /dev/null 2> "$TMP/nolib.err"
check no_libmpi $? 3
grep -q "kvshard: error: --sweep: started by mpirun but cannot load Open MPI's libmpi (tried /nonexistent/libmpi.so" \
  "$TMP/nolib.err" || { echo "FAIL: no_libmpi message"; cat "$TMP/nolib.err"; fail=1; }

# A row error is exit 2 from rank 0, with every row printed.
"${MPIRUN[@]}" "$KV" simulate "$TMP/w.jsonl" --quiet --sweep context-length=163840,100000,131072 > "$TMP/err.txt" \
  2> "$TMP/err.err"
rc=$?
[[ $rc -eq 2 ]] || { echo "FAIL: row error: exit $rc, want 2"; cat "$TMP/err.err"; fail=1; }
grep -q "kvshard: error: --sweep: bad input in 1 of 3 configurations; first, row 1: requests\[" "$TMP/err.err" ||
  { echo "FAIL: row error message"; cat "$TMP/err.err"; fail=1; }
[[ $(wc -l < "$TMP/err.txt") -eq 4 ]] || { echo "FAIL: want 3 rows"; cat "$TMP/err.txt"; fail=1; }

# A workload no rank can read: exit 2, and no rank hangs.
timeout 60 "${MPIRUN[@]}" "$KV" simulate /nonexistent.jsonl --sweep shard-size=4,8 > /dev/null 2> "$TMP/bad.err"
rc=$?
[[ $rc -eq 2 ]] || { echo "FAIL: missing workload: exit $rc, want 2"; cat "$TMP/bad.err"; fail=1; }
grep -q "kvshard: error: --workload: /nonexistent.jsonl: cannot open file" "$TMP/bad.err" ||
  { echo "FAIL: missing workload message"; cat "$TMP/bad.err"; fail=1; }
exit $fail
