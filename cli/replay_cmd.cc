// kvshard replay: runs a trace (docs/trace-format.md) through the reference model and reports the first
// decision that differs from it, by line and field (exit 1), or a malformed line (exit 2); a truncated last record
// (a recorder killed mid-write) is reported after every complete record was checked.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <future>
#include <ostream>
#include <system_error>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/memory_limit.h"
#include "core/trace_read_ahead.h"
#include "replay/replayer.h"
#ifdef KVSHARD_HAVE_CUDA
#include "replay/gpu_pool_path.h"
#endif

namespace kvshard::cli {
namespace {

void DeclareFlags(po::options_description& flags) {
  flags.add_options()("trace", File(), "the trace (JSON Lines; also given without the flag); - reads standard input")(
      "keep-going", po::bool_switch(), "report every mismatch (one line each on stdout), not only the first")(
      "json", po::bool_switch(),
      "print one JSON document: mismatch_list (each mismatch as {line, op, field, expected, got, message, meta}), "
      "records, fields_checked, rows_compared, mismatches, first_mismatch, truncated_line")(
      "backend", BackendValue(),
      "where the pool pipeline's records move data: ref, gpu (CUDA; reads checked "
      "against the unsharded pool) or diff (both; every plan and byte compared)")(
      "impl", ImplValue(),
      "who builds gather_plan, split and rerange plans: ref (the reference) or fast "
      "(cpu_fast/; replaying a recorded trace with it diffs the fast paths against the engine)")(
      "gpus", Int(1, 1024)->default_value(1),
      "with --backend gpu|diff: 1 emulates the trace's N ranks on GPU 0; N drives N "
      "GPUs through NCCL")("read-threads", Int(1, TraceReadAhead::kMaxThreads),
                           "threads that read and parse records ahead of the checking thread (default: 4 on a host of "
                           "8 cores or more, 2 on 4-7 cores, else 1)")(
      "timing", po::bool_switch(),
      "end the summary with where the host's time went (the checking thread's CPU seconds, its waits for the reader "
      "threads and theirs), as --backend gpu|diff always do")(
      "full-invariants", po::bool_switch(),
      "after every allocator record also walk the whole radix cache (by default only what the record changed is "
      "checked; the properties run both)");
  DeclareMaxMemoryFlag(flags);
}

void PrintSummary(const replay::ReplayReport& report, bool host_timing, std::ostream& out) {
  const replay::ReplaySummary& s = report.summary;
  out << "replayed " << s.records << " records, " << s.fields << " fields checked, ";
  if (report.rows_compared > 0) out << report.rows_compared << " KV rows compared, ";
  out << s.mismatches << " mismatches";
  if (report.device_thread) {  // --backend gpu|diff: is the device or the host the slower of the two?
    char timing[400];
    std::snprintf(
        timing, sizeof(timing),
        "; device thread busy %.2f s (set-up %.2f s: driver %.2f, context %.2f, buffers %.2f; pending checks "
        "taken %lld times), the checking thread "
        "waited %.2f s for it; plan thread busy %.2f s, the device thread waited %.2f s for it",
        report.device_busy_seconds, report.device_setup_seconds, report.device_driver_seconds,
        report.device_context_seconds,
        std::max(0.0, report.device_setup_seconds - report.device_driver_seconds - report.device_context_seconds),
        static_cast<long long>(report.device_checks_taken), report.device_waited_seconds, report.plan_busy_seconds,
        report.plan_waited_seconds);
    out << timing;
  }
  if (report.device_thread || host_timing) {  // which host thread holds the wall time
    char host[320];
    std::snprintf(host, sizeof(host),
                  "; checking thread CPU %.2f s, waited %.2f s for the %d reader threads (their CPU %.2f s; they "
                  "judged %lld of the %lld stateless records); replay %.2f s wall, released in %.2f s",
                  report.checking_cpu_seconds, report.reader_wait_seconds, report.read_threads,
                  report.reader_cpu_seconds, static_cast<long long>(report.stateless_judged_ahead),
                  static_cast<long long>(report.stateless_records), report.replay_seconds, report.release_seconds);
    out << host;
  }
  out << "\n";
}

// The --json answer, written as the replay goes so that memory stays flat however many mismatches --keep-going
// lists: {"mismatch_list": [one object a line], then the counts}. Nothing is written before the first mismatch, so
// a trace refused before one prints nothing on standard output.
class JsonAnswer {
 public:
  explicit JsonAnswer(std::ostream& out) : out_(out) {}
  bool opened() const { return opened_; }

  void Add(const replay::ReplayMismatch& m) {
    Open();
    out_ << (listed_++ == 0 ? "\n    " : ",\n    ")
         << replay::MismatchJson(m).dump(-1, ' ', false, Json::error_handler_t::replace);
  }

  // Closes the document with the counts; `error` (a malformed line that stopped the replay after mismatches were
  // listed) is added when not empty, so standard output stays one JSON document.
  void Finish(const replay::ReplayReport& r, const std::string& error) {
    Open();
    out_ << (listed_ == 0 ? "],\n" : "\n  ],\n");
    const replay::ReplaySummary& s = r.summary;
    Json tail;
    tail["records"] = s.records;
    tail["fields_checked"] = s.fields;
    tail["rows_compared"] = r.rows_compared;
    tail["mismatches"] = s.mismatches;
    tail["first_mismatch"] = s.first_mismatch.empty() ? Json(nullptr) : Json(s.first_mismatch);
    tail["truncated_line"] = r.truncated_line != 0 ? Json(r.truncated_line) : Json(nullptr);
    if (!error.empty()) tail["error"] = error;
    const std::string text = tail.dump(2, ' ', false, Json::error_handler_t::replace);
    out_ << text.substr(2) << "\n";  // the members after the list: "{\n" dropped
  }

 private:
  void Open() {
    if (!opened_) out_ << "{\n  \"mismatch_list\": [";
    opened_ = true;
  }
  std::ostream& out_;
  bool opened_ = false;
  int64_t listed_ = 0;
};

Status Replay(std::istream& in, const Flags& flags, std::ostream& out) {
  replay::ReplayOptions options;
  // --backend gpu|diff initializes the CUDA driver on the device thread while the host replays: the check that a
  // device is visible runs on a thread of its own too, and its error, if any, is the command's.
  KVSHARD_ASSIGN_OR_RETURN(options.backend, BackendFlag(flags, /*check_device=*/false));
#ifdef KVSHARD_HAVE_CUDA
  // Before the first CUDA call and the command's first thread: the driver's settings for the paths it will make.
  if (options.backend != replay::Backend::kRef) replay::PrepareGpuPoolPaths(static_cast<int>(flags.Int("gpus")));
#endif
  std::future<Status> device_check;
  if (options.backend != replay::Backend::kRef) {
    const char* flag = options.backend == replay::Backend::kDiff ? "--backend diff" : "--backend gpu";
    try {
      device_check = std::async(std::launch::async, [flag] { return GpuAvailable(flag); });
    } catch (const std::system_error&) {  // no thread to be had: check here
      KVSHARD_RETURN_IF_ERROR(GpuAvailable(flag));
    }
  }
  if (options.backend == replay::Backend::kRef && flags.Given("gpus")) {
    return InvalidArgument("--gpus: does not apply to --backend ref (the GPUs of --backend gpu or diff)");
  }
  options.impl = ImplFlag(flags);
  options.budget = Budget(flags);
  options.line_check = options.budget.Lines();
  options.full_invariants = flags.Bool("full-invariants");
  if (flags.Given("read-threads")) options.read_threads = static_cast<int>(flags.Int("read-threads"));
#ifdef KVSHARD_HAVE_CUDA
  const int gpus = static_cast<int>(flags.Int("gpus"));
  options.make_device = [gpus](const replay::PoolGeometry& g) { return replay::MakeGpuPoolPath(g, gpus); };
#endif
  const bool json = flags.Bool("json");
  if (json && flags.Bool("timing")) return InvalidArgument("--timing: not with --json (it ends the summary line)");
  const bool keep_going = flags.Bool("keep-going");
  JsonAnswer answer(out);
  std::function<void(const replay::ReplayMismatch&)> on_mismatch;
  if (keep_going) {
    on_mismatch = [&](const replay::ReplayMismatch& m) {
      if (json) {
        answer.Add(m);
      } else {
        out << "mismatch: " << replay::MismatchText(m) << "\n";
      }
    };
  }
  // Every record frees and takes again about the same few megabytes: glibc would hand the heap's top back to the
  // kernel after each (past 128 KiB) and fault it in again; keep it (what is kept is what one record used). The
  // binary's malloc is glibc's unless built with jemalloc (//third_party:malloc), which ignores this.
#if defined(__GLIBC__)
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 16 << 20);
#endif
  replay::ReplayReport report;
  const Status status = replay::ReplayStream(in, options, &report, on_mismatch);
  if (device_check.valid()) KVSHARD_RETURN_IF_ERROR(device_check.get());
  const replay::ReplaySummary& s = report.summary;
  const bool truncated = report.truncated_line != 0;  // status is then the truncation, every complete record checked
  if (!status.ok() && status.code() != StatusCode::kMismatch && !truncated) {  // a malformed trace
    if (answer.opened()) answer.Finish(report, status.message());
    return status;
  }
  if (json) {
    if (!keep_going && report.first) answer.Add(*report.first);
    answer.Finish(report, "");
  } else if (status.code() != StatusCode::kMismatch && (s.mismatches > 0 || !truncated)) {
    PrintSummary(report, flags.Bool("timing"), out);
  }
  if (status.code() == StatusCode::kMismatch) return status;  // the first one, without --keep-going
  if (s.mismatches > 0) {  // a verification failure wins over a truncated last record, which it still names
    return Mismatch(s.mismatches, " mismatches in ", s.records, " records; first: ", s.first_mismatch,
                    truncated ? "; " + status.message() : "");
  }
  return status;  // OK, or the truncated last record (exit 2)
}

// A malformed trace names the flag and the line: "--trace: line 2: op: unknown op ..." (mismatches stay "line N").
// What was printed must have been written: a failed write of standard output is an error, whatever the verdict.
Status Run(const Flags& flags, std::ostream& out) {
  const Status status =
      FileError("trace", flags.WithInput("trace", [&](std::istream& in) { return Replay(in, flags, out); }));
  out.flush();
  if (!out) return InvalidArgument("standard output: write failed");
  return status;
}

}  // namespace

Command ReplayCommand() {
  Command c{"replay", "replay a recorded trace through the reference and report the first decision that differs",
            "FILE|- [--keep-going] [--json] [--impl ref|fast] [--backend ref|gpu|diff] [--gpus N] [--full-invariants] "
            "[--read-threads N] [--timing] "
            "[--max-memory BYTES]",
            DeclareFlags, Run};
  c.positional = "trace";
  return c;
}

}  // namespace kvshard::cli
