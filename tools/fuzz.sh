#!/usr/bin/env bash
# libFuzzer campaigns over the targets of fuzz/ (docs/RELIABILITY.md, "Fuzzing").
#   tools/fuzz.sh build OUT_DIR
#       clang + ASan + UBSan fuzzers (bazel --config=fuzz in its own output base) into OUT_DIR/bin, with the seed
#       corpora (testdata/fuzz/<t>/), the dictionaries (fuzz/dicts/) and this script: OUT_DIR is self-contained.
#   OUT_DIR/fuzz.sh run OUT_DIR SECONDS [WORKERS_PER_TARGET] [TARGET...]
#       every target at once for SECONDS of wall time, each in fork mode with WORKERS_PER_TARGET workers
#       (default: the cores divided among the targets, rounded up), on OUT_DIR/corpus/<t> (started from the
#       seeds; new inputs kept there), crashes kept in OUT_DIR/crashes/<t>/; prints the summary table and writes
#       it to OUT_DIR/summary.md (target, executions, exec/s, CPU s, cov, ft, corpus, crashes / timeouts / ooms).
#   OUT_DIR/fuzz.sh replay OUT_DIR  — every crash file again through its fuzzer (what a fix must make pass).
#   OUT_DIR/fuzz.sh seeds OUT_DIR   — every seed input once through its fuzzer (CI: tools/test.sh), a JUnit case per
#       target in OUT_DIR/junit/seeds.xml (tools/test_summary.py counts it); exits 1 where one fails.
set -uo pipefail
cmd=${1:?usage: tools/fuzz.sh build OUT_DIR | run OUT_DIR SECONDS [WORKERS] [TARGET...] | replay OUT_DIR | seeds OUT_DIR}
out=${2:?OUT_DIR missing}

# Longest input per target (bytes): JSON files a little above the seeds, argv lines and binary decodes short.
max_len() {
  case $1 in
    trace|calibration) echo 32768 ;;
    batch|alloc_script|workload) echo 8192 ;;
    cli) echo 2048 ;;
    *) echo 1024 ;;
  esac
}

build() {
  local here; here=$(cd "$(dirname "$0")/.." && pwd)
  cd "$here" || exit 2
  bash tools/install_deps.sh fuzz || exit 2
  local base=${KVSHARD_FUZZ_OUTPUT_BASE:-/tmp/kvshard_fuzz_ob}
  local targets; targets=$(sed -n 's/^    "\([a-z_]*\)": \[.*/\1/p; s/^    "\([a-z_]*\)": \[$/\1/p' fuzz/BUILD.bazel | sort -u)
  [[ -n $targets ]] || { echo "fuzz.sh: no targets found in fuzz/BUILD.bazel" >&2; exit 2; }
  local labels=()
  for t in $targets; do labels+=("//fuzz:${t}_fuzzer"); done
  # CPU only (the fuzzers never touch a GPU); no convenience symlinks (they would point at this output base).
  CUDA_PATH=/nonexistent bazel --output_base="$base" build --config=fuzz --symlink_prefix=/ --noshow_progress \
    ${KVSHARD_BAZEL_FLAGS:-} "${labels[@]}" >&2 || exit 1
  local bin; bin=$(CUDA_PATH=/nonexistent bazel --output_base="$base" info --config=fuzz bazel-bin 2>/dev/null)
  mkdir -p "$out/bin" "$out/seeds" "$out/dicts"
  for t in $targets; do
    install -m 755 "$bin/fuzz/${t}_fuzzer" "$out/bin/"
    rm -rf "$out/seeds/$t"; cp -r "testdata/fuzz/$t" "$out/seeds/$t"
    [[ -f fuzz/dicts/$t.dict ]] && cp "fuzz/dicts/$t.dict" "$out/dicts/"
  done
  install -m 755 tools/fuzz.sh "$out/fuzz.sh"
  echo "fuzz.sh: built $(wc -w <<<"$targets") fuzzers into $out/bin" >&2
}

# The last fork-mode status line of a log: "#runs: cov: C ft: F corp: N exec/s E oom/timeout/crash: a/b/c time: Ts".
last_stats() { grep -a '^#[0-9]*: cov: ' "$1" | tail -1; }

run() {
  local seconds=${3:?SECONDS missing} workers=${4:-}
  shift 4 2>/dev/null || shift $#
  cd "$out" || exit 2
  out=$(pwd)
  local targets=("$@")
  if ((${#targets[@]} == 0)); then
    for b in bin/*_fuzzer; do t=$(basename "$b"); targets+=("${t%_fuzzer}"); done
  fi
  local cores; cores=$(nproc)
  [[ -n $workers ]] || workers=$(((cores + ${#targets[@]} - 1) / ${#targets[@]}))
  echo "fuzz.sh: ${#targets[@]} targets x $workers workers for ${seconds}s on $cores cores" >&2
  mkdir -p corpus crashes logs
  local pids=()
  for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "crashes/$t" "logs/$t"
    [[ -n $(ls -A "corpus/$t") ]] || cp "seeds/$t/"* "corpus/$t/" 2>/dev/null
    local dict=(); [[ -f dicts/$t.dict ]] && dict=(-dict="$out/dicts/$t.dict")
    (
      # Fork mode's workers write their logs and temporary files into the current folder.
      cd "logs/$t" || exit 2
      TIMEFORMAT='%U %S'
      { time "$out/bin/${t}_fuzzer" -fork="$workers" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
          -max_total_time="$seconds" -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2560 \
          -artifact_prefix="$out/crashes/$t/" -print_final_stats=1 "${dict[@]}" \
          "$out/corpus/$t" "$out/seeds/$t" >fuzz.log 2>&1; } 2>cpu_time
    ) &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  summary "${targets[@]}" | tee summary.md
}

summary() {
  echo "| target | executions | exec/s | CPU s | cov | ft | corpus | crashes | timeouts | ooms |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for t in "$@"; do
    local line runs cov ft corp time cpu crashes timeouts ooms
    line=$(last_stats "logs/$t/fuzz.log")
    runs=$(sed -n 's/^#\([0-9]*\):.*/\1/p' <<<"$line")
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$line")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$line")
    time=$(sed -n 's/.* time: \([0-9]*\)s.*/\1/p' <<<"$line")
    corp=$(ls "corpus/$t" | wc -l)
    cpu=$(awk '{printf "%d", $1 + $2}' "logs/$t/cpu_time" 2>/dev/null)
    crashes=$(ls "crashes/$t" | grep -c '^crash-')
    timeouts=$(ls "crashes/$t" | grep -c '^timeout-')
    ooms=$(ls "crashes/$t" | grep -c '^\(oom\|leak\)-')
    local rate=0; [[ -n $runs && -n $time && $time -gt 0 ]] && rate=$((runs / time))
    echo "| $t | ${runs:-0} | $rate | ${cpu:-?} | ${cov:-?} | ${ft:-?} | $corp | $crashes | $timeouts | $ooms |"
  done
}

replay() {
  cd "$out" || exit 2
  local rc=0
  for d in crashes/*/; do
    t=$(basename "$d")
    for f in "$d"*; do
      [[ -f $f ]] || continue
      echo "== $t $f"
      "bin/${t}_fuzzer" -runs=1 "$f" >/dev/null 2>"$f.replay.log" && echo "passes now" || { echo "still fails"; rc=1; }
    done
  done
  return $rc
}

# Each target's seeds once (-runs=0 runs the given corpus and stops), with the campaign's limits; a failure keeps
# its log in OUT_DIR/logs/seeds/<t>.log and quotes the sanitizer's or fuzzer's first report line.
seeds() {
  cd "$out" || exit 2
  mkdir -p junit logs/seeds
  local rc=0 cases=() t log status message
  compgen -G 'bin/*_fuzzer' > /dev/null || { echo "fuzz.sh: no fuzzers in $out/bin (tools/fuzz.sh build $out)" >&2; exit 2; }
  for b in bin/*_fuzzer; do
    t=$(basename "$b"); t=${t%_fuzzer}
    log=logs/seeds/$t.log
    if "$b" -runs=0 -timeout=10 -rss_limit_mb=2560 -max_len="$(max_len "$t")" "seeds/$t" >"$log" 2>&1; then
      status=passed message=""
      echo "fuzz.sh: seeds: $t: $(ls "seeds/$t" | wc -l) inputs passed"
    else
      status=failed rc=1
      message=$(grep -a -m1 -E 'ERROR: |runtime error: |FUZZ_ASSERT|deadly signal' "$log" || tail -n 1 "$log")
      echo "fuzz.sh: seeds: $t FAILED: $message (log: $out/$log)" >&2
    fi
    cases+=("$t" "$status" "$message")
  done
  python3 - "${cases[@]}" > junit/seeds.xml <<'PY'
import sys
from xml.sax.saxutils import quoteattr
a = sys.argv[1:]
cases = [a[i:i + 3] for i in range(0, len(a), 3)]
failed = sum(s == "failed" for _, s, _ in cases)
print(f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites tests="{len(cases)}" failures="{failed}">')
print(f'<testsuite name="fuzz_seeds" tests="{len(cases)}" failures="{failed}">')
for name, status, message in cases:
    body = f"<failure message={quoteattr(message)}/>" if status == "failed" else ""
    print(f'<testcase classname="fuzz_seeds" name="{name}">{body}</testcase>')
print("</testsuite>\n</testsuites>")
PY
  return $rc
}

case $cmd in
  build) build ;;
  run) run "$@" ;;
  replay) replay ;;
  seeds) seeds ;;
  *) echo "fuzz.sh: unknown command $cmd (build, run, replay or seeds)" >&2; exit 2 ;;
esac
