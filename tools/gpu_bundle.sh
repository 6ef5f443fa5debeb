#!/usr/bin/env bash
# Builds here (Bazel, -c opt, static except libcudart-static/libnccl/libmpi) and packs the CLI, every GPU test
# binary and the gpu_bin benchmarks (libbenchmark in lib/) into OUT_DIR with run_all.sh, for GPU machines that have
# no Bazel:
#   tools/gpu_bundle.sh .bundle && <copy .bundle to the GPU host> && .bundle/run_all.sh
set -euo pipefail
out=${1:?usage: tools/gpu_bundle.sh OUT_DIR}
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
[[ -x /usr/local/cuda/bin/nvcc ]] || { echo "kvshard: error: no CUDA toolkit: cannot build the GPU bundle" >&2; exit 2; }
tests=$(bazel query --noshow_progress 'attr(tags, "\bgpu\b", tests(//...))' 2>/dev/null)
bins=$(bazel query --noshow_progress 'attr(tags, "\bgpu_bin\b", //...)' 2>/dev/null || true)
# KVSHARD_BUNDLE_FLAGS: extra build flags after the defaults, e.g. "--config=test_archs -c fastbuild" for a quick
# sm_90-only bundle that reuses tools/test.sh's objects (figures for docs/PERFORMANCE.md come from the default).
bazel build -c opt --dynamic_mode=off ${KVSHARD_BUNDLE_FLAGS:-} --noshow_progress //cli:kvshard $tests $bins >&2
rm -rf "$out"; mkdir -p "$out/bin"
cp bazel-bin/cli/kvshard "$out/bin/"
for t in $tests $bins; do
  p=${t#//}; p=${p/://}
  cp "bazel-bin/$p" "$out/bin/"
done
# Google Benchmark comes from Debian only as a shared library: the benchmarks' copy goes along in lib/, where their
# rpath ($ORIGIN/../lib) finds it on hosts without the package.
for f in "$out"/bin/*; do
  for lib in $(ldd "$f" | awk '$1 ~ /^libbenchmark/ && $3 ~ /^\// {print $3}'); do
    mkdir -p "$out/lib" && cp -L "$lib" "$out/lib/$(basename "$lib")"
  done
done
cp tools/test_summary.py tools/cuda_archs.py tools/sanitizer_report.py "$out/"
cp -r testdata "$out/" 2>/dev/null || true
cat > "$out/run_all.sh" <<'RUN'
#!/usr/bin/env bash
# Runs every bundled GPU test binary (gtest XML into logs/), the MPI test under mpirun (one process per GPU)
# when >= 2 GPUs are visible, and prints "N passed, N failed, N skipped".
#   KVSHARD_SANITIZE=memcheck|racecheck  wraps each binary in compute-sanitizer (fewer RapidCheck cases); each
#   binary's sanitizer verdict is a test case of the summary (sanitizer_report.py: its errors fail it, except the
#   documented suppression of NCCL's kernel-image probes), so a sanitizer failure is never "0 failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0
logs=${KVSHARD_LOG_DIR:-$here/logs}
rm -rf "$logs"; mkdir -p "$logs"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
if [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]]; then ngpu=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .); fi
wrap=()
if [[ -n "${KVSHARD_SANITIZE:-}" ]]; then
  wrap=(compute-sanitizer --tool "$KVSHARD_SANITIZE" --error-exitcode 1 --print-limit 20)
  export RC_PARAMS=${RC_PARAMS:-max_success=10}
fi
rc=0
for t in "$here"/bin/*_test; do
  name=$(basename "$t")
  [[ $name == nccl_mpi_test ]] && continue
  echo "== $name"
  "${wrap[@]}" "$t" --gtest_output="xml:$logs/$name.xml" "$@" >"$logs/$name.log" 2>&1
  code=$?
  if ((${#wrap[@]})); then  # the verdict, not the exit code: the suppressed probes make compute-sanitizer exit 1
    python3 "$here/sanitizer_report.py" "$name" "$logs/$name.log" "$code" "$logs/$name.sanitizer.xml" || rc=1
  else
    [[ $code -eq 0 ]] || rc=1
  fi
  grep -E '^\[ *(OK|FAILED|SKIPPED) *\]|Falsifiable|RC_PARAMS|reproduce|Failure|mismatch|SKIPPED:' "$logs/$name.log" | head -n 60
done
if [[ -x "$here/bin/nccl_mpi_test" ]]; then
  if [[ $ngpu -ge 2 ]] && command -v mpirun >/dev/null; then
    echo "== nccl_mpi_test (mpirun -np $ngpu)"
    mpirun --allow-run-as-root --oversubscribe -np "$ngpu" -x NCCL_NVLS_ENABLE -x RC_PARAMS \
      "${wrap[@]}" "$here/bin/nccl_mpi_test" --gtest_output="xml:$logs/nccl_mpi_test.xml" >"$logs/nccl_mpi_test.log" 2>&1
    code=$?
    if ((${#wrap[@]})); then
      python3 "$here/sanitizer_report.py" nccl_mpi_test "$logs/nccl_mpi_test.log" "$code" \
        "$logs/nccl_mpi_test.sanitizer.xml" || rc=1
    else
      [[ $code -eq 0 ]] || rc=1
    fi
    grep -E '\[ *(OK|FAILED|SKIPPED) *\]|Failure|mismatch' "$logs/nccl_mpi_test.log" | head -n 40
  else
    echo "== nccl_mpi_test"
    "$here/bin/nccl_mpi_test" --gtest_output="xml:$logs/nccl_mpi_test.xml" 2>&1 | tail -n 5
  fi
fi
# The CLI's GPU-vs-reference diffs on the bundled examples (exit 1 and the first mismatch on a difference).
cli_cases=(
  "place --shard-size 4 --page-size 16 --rank 1 --locs-file $here/testdata/placement/token_slots.txt"
  "gather-plan --batch $here/testdata/gather_plan/spec3_batch_n4_ps16.json"
  "rerange --cp-size 8 --page-size 64 --extend-lens 1000,64,65,3000,1 --prefix-lens 0,64,128,0,640"
  "rerange --cp-size 2 --page-size 2 --extend-lens 1"
)
{
  echo '<testsuites><testsuite name="CliDiff">'
  i=0
  for c in "${cli_cases[@]}"; do
    i=$((i+1)); name="case${i}_${c%% *}"
    out=$("$here/bin/kvshard" $c --backend diff 2>&1 >/dev/null); crc=$?
    if [[ $crc -eq 0 ]]; then
      echo "<testcase classname=\"CliDiff\" name=\"$name\"/>"
    elif [[ $crc -eq 3 ]]; then
      echo "<testcase classname=\"CliDiff\" name=\"$name\"><skipped/></testcase>"
    else
      echo "<testcase classname=\"CliDiff\" name=\"$name\"><failure message=\"diff failed\"/></testcase>"
      echo "CLI diff failed: kvshard $c --backend diff: $out" >&2
      rc=1
    fi
  done
  echo '</testsuite></testsuites>'
} > "$logs/cli_diff.xml"
python3 "$here/test_summary.py" "$logs" || rc=1
exit $rc
RUN
chmod +x "$out/run_all.sh"
echo "bundle in $out:" >&2
for f in "$out"/bin/*; do
  echo "  $(basename "$f"): $(ldd "$f" | awk '{print $1}' | grep -vE '^(linux-vdso|/lib64/ld-linux)' | tr '\n' ' ')" >&2
done
# The fat binaries (four SASS architectures + PTX) make the bundle about 90 MB; KVSHARD_BUNDLE_TARBALL=FILE also
# packs it as an xz tarball (about 14 MB), e.g. for a transfer limit: tar -xJf FILE recreates OUT_DIR.
if [[ -n "${KVSHARD_BUNDLE_TARBALL:-}" ]]; then
  mkdir -p "$(dirname "$KVSHARD_BUNDLE_TARBALL")"
  tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T0 -3 > "$KVSHARD_BUNDLE_TARBALL"
  echo "packed: $KVSHARD_BUNDLE_TARBALL ($(du -h "$KVSHARD_BUNDLE_TARBALL" | cut -f1))" >&2
fi
