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
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/memory_limit.h"
#include "cli/ordered_jobs.h"
#include "core/trace_read_ahead.h"
#include "replay/replayer.h"
#ifdef KVSHARD_HAVE_CUDA
#include "replay/gpu_pool_path.h"
#endif

namespace kvshard::cli {
namespace {

// The most traces --jobs replays at once.
constexpr int kMaxJobs = 64;

void DeclareFlags(po::options_description& flags) {
  flags.add_options()("trace", File(), "the trace (JSON Lines; also given without the flag); - reads standard input")(
      "more-traces", po::value<std::vector<std::string>>()->value_name("FILE...")->multitoken(),
      "more traces, replayed in turn by the same process (also given without the flag, after the first): the GPU "
      "backends start the CUDA driver and context once; each summary line names its trace, a last line totals them")(
      "jobs", Int(1, kMaxJobs)->default_value(1),
      "replay up to N of several traces at once (each with its own threads; --max-memory is shared among them); "
      "the output is what one at a time prints")("keep-going", po::bool_switch(),
                                                 "report every mismatch (one line each on stdout), not only the first")(
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

// The counts of a --json answer, of one trace or of several ("first_mismatch" null when there is none).
Json CountsJson(int64_t records, int64_t fields, int64_t rows_compared, int64_t mismatches,
                const std::string& first_mismatch) {
  Json j;
  j["records"] = records;
  j["fields_checked"] = fields;
  j["rows_compared"] = rows_compared;
  j["mismatches"] = mismatches;
  j["first_mismatch"] = first_mismatch.empty() ? Json(nullptr) : Json(first_mismatch);
  return j;
}

// A trace's --json answer, written as the replay goes so that memory stays flat however many mismatches --keep-going
// lists: {"mismatch_list": [one object a line], then the counts}. Nothing is written before the first mismatch, so
// a trace refused before one prints nothing on standard output. With several traces the answer is one element of
// the command's "traces" list: `open` writes what comes before it, and the element starts with its "trace".
class JsonAnswer {
 public:
  explicit JsonAnswer(std::ostream& out, std::string trace = "", std::string indent = "",
                      std::function<void()> open = nullptr)
      : out_(out), trace_(std::move(trace)), indent_(std::move(indent)), open_(std::move(open)) {}
  bool opened() const { return opened_; }

  void Add(const replay::ReplayMismatch& m) {
    Open();
    out_ << (listed_++ == 0 ? "\n    " : ",\n    ") << indent_
         << replay::MismatchJson(m).dump(-1, ' ', false, Json::error_handler_t::replace);
  }

  // Closes the document with the counts; `error` (a malformed line that stopped the replay after mismatches were
  // listed) is added when not empty, so standard output stays one JSON document.
  void Finish(const replay::ReplayReport& r, const std::string& error) {
    Open();
    out_ << (listed_ == 0 ? "]," : "\n  " + indent_ + "],");
    const replay::ReplaySummary& s = r.summary;
    Json tail = CountsJson(s.records, s.fields, r.rows_compared, s.mismatches, s.first_mismatch);
    tail["truncated_line"] = r.truncated_line != 0 ? Json(r.truncated_line) : Json(nullptr);
    if (!error.empty()) tail["error"] = error;
    const std::string text = tail.dump(2, ' ', false, Json::error_handler_t::replace);
    for (size_t at = 1; at < text.size(); ++at) {  // the members after the list, "{" dropped, each line indented
      out_ << text[at];
      if (text[at] == '\n' && at + 1 < text.size()) out_ << indent_;
    }
    if (indent_.empty()) out_ << "\n";
  }

 private:
  void Open() {
    if (opened_) return;
    opened_ = true;
    if (open_) open_();
    out_ << "{\n  " << indent_;
    if (!trace_.empty())
      out_ << "\"trace\": " << Json(trace_).dump(-1, ' ', false, Json::error_handler_t::replace) << ",\n  " << indent_;
    out_ << "\"mismatch_list\": [";
  }
  std::ostream& out_;
  const std::string trace_, indent_;
  const std::function<void()> open_;
  bool opened_ = false;
  int64_t listed_ = 0;
};

// The totals of the traces replayed so far (several traces a command).
struct Totals {
  int64_t traces = 0, records = 0, fields = 0, rows_compared = 0, mismatches = 0;
  std::string first_mismatch;  // "<trace>: line N: ..."

  void Add(const std::string& trace, const replay::ReplayReport& r) {
    ++traces;
    records += r.summary.records;
    fields += r.summary.fields;
    rows_compared += r.rows_compared;
    mismatches += r.summary.mismatches;
    if (first_mismatch.empty() && !r.summary.first_mismatch.empty()) {
      first_mismatch = trace + ": " + r.summary.first_mismatch;
    }
  }
};

// How one trace's replay ended for the command.
struct TraceOutcome {
  Status status;         // what a replay of this trace alone returns (OK, a mismatch, or an error)
  bool answered = true;  // whether its answer was printed (not a trace refused before its first mismatch): totalled
  replay::ReplayReport report;
};

// The settings every trace of the command shares.
struct ReplaySettings {
  replay::ReplayOptions options;
  bool json = false, keep_going = false, timing = false;
};

// Replays one trace from `in`, printing what a replay of it alone prints; with several traces each line names
// `trace` and the --json answer is one element of "traces" (`open_json` writes what comes before it).
TraceOutcome ReplayTrace(std::istream& in, const ReplaySettings& settings, const std::string& trace, bool several,
                         const std::function<void()>& open_json, std::ostream& out) {
  const std::string named = several ? EscapeForOneLine(trace) + ": " : "";  // a trace's line stays one line
  JsonAnswer answer(out, several ? trace : "", several ? "    " : "", open_json);
  std::function<void(const replay::ReplayMismatch&)> on_mismatch;
  if (settings.keep_going) {
    on_mismatch = [&](const replay::ReplayMismatch& m) {
      if (settings.json) {
        answer.Add(m);
      } else {
        out << "mismatch: " << named << replay::MismatchText(m) << "\n";
      }
    };
  }
  TraceOutcome o;
  const Status status = replay::ReplayStream(in, settings.options, &o.report, on_mismatch);
  const replay::ReplaySummary& s = o.report.summary;
  const bool truncated = o.report.truncated_line != 0;  // status is then the truncation, every complete record checked
  if (!status.ok() && status.code() != StatusCode::kMismatch && !truncated) {  // a malformed trace
    if (answer.opened()) answer.Finish(o.report, status.message());
    o.answered = answer.opened();
    o.status = status;
    return o;
  }
  if (settings.json) {
    if (!settings.keep_going && o.report.first) answer.Add(*o.report.first);
    answer.Finish(o.report, "");
  } else if (status.code() != StatusCode::kMismatch && (s.mismatches > 0 || !truncated)) {
    out << named;
    PrintSummary(o.report, settings.timing, out);
  }
  if (status.code() == StatusCode::kMismatch) {  // the first one, without --keep-going
    o.status = several ? Mismatch(named, status.message()) : status;
  } else if (s.mismatches > 0) {  // a verification failure wins over a truncated last record, which it still names
    o.status = Mismatch(s.mismatches, " mismatches in ", s.records, " records; first: ", named, s.first_mismatch,
                        truncated ? "; " + status.message() : "");
  } else {
    o.status = status;  // OK, or the truncated last record (exit 2)
  }
  return o;
}

// The traces of the command, in the order given: the first, then the bare arguments after it (--more-traces).
StatusOr<std::vector<std::string>> TracePaths(const Flags& flags) {
  KVSHARD_RETURN_IF_ERROR(flags.Require({"trace"}));
  std::vector<std::string> paths = {flags.String("trace")};
  if (flags.Has("more-traces")) {
    for (const std::string& p : flags.StringList("more-traces")) paths.push_back(p);
  }
  if (paths.size() > 1 && std::find(paths.begin(), paths.end(), "-") != paths.end()) {
    return InvalidArgument("--trace: - (standard input) only as the one trace of the command");
  }
  return paths;
}

Status Replay(const Flags& flags, std::ostream& out) {
  KVSHARD_ASSIGN_OR_RETURN(const std::vector<std::string> paths, TracePaths(flags));
  const bool several = paths.size() > 1;
  const int jobs = static_cast<int>(std::min<int64_t>(flags.Int("jobs"), static_cast<int64_t>(paths.size())));
  if (jobs > 1 && flags.Int("gpus") > 1) {
    return InvalidArgument("--jobs: one trace at a time with --gpus ", flags.Int("gpus"),
                           " (each replay drives every GPU through NCCL)");
  }
  ReplaySettings settings;
  replay::ReplayOptions& options = settings.options;
  // --backend gpu|diff initializes the CUDA driver on the device thread while the host replays: the check that a
  // device is visible runs on a thread of its own too, and its error, if any, is the command's.
  KVSHARD_ASSIGN_OR_RETURN(options.backend, BackendFlag(flags, /*check_device=*/false));
#ifdef KVSHARD_HAVE_CUDA
  // Before the first CUDA call and the command's first thread: the driver's settings for the paths it will make.
  if (options.backend != replay::Backend::kRef) {
    replay::PrepareGpuPoolPaths(static_cast<int>(flags.Int("gpus")), jobs);
  }
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
  options.budget = Budget(flags).Share(jobs, "--jobs");  // the replays that run at once share the cap
  options.line_check = options.budget.Lines();
  options.full_invariants = flags.Bool("full-invariants");
  if (flags.Given("read-threads")) options.read_threads = static_cast<int>(flags.Int("read-threads"));
#ifdef KVSHARD_HAVE_CUDA
  const int gpus = static_cast<int>(flags.Int("gpus"));
  options.make_device = [gpus](const replay::PoolGeometry& g) { return replay::MakeGpuPoolPath(g, gpus); };
#endif
  settings.json = flags.Bool("json");
  settings.timing = flags.Bool("timing");
  if (settings.json && settings.timing) {
    return InvalidArgument("--timing: not with --json (it ends the summary line)");
  }
  settings.keep_going = flags.Bool("keep-going");
  // Every record frees and takes again about the same few megabytes: glibc would hand the heap's top back to the
  // kernel after each (past 128 KiB) and fault it in again; keep it (what is kept is what one record used). The
  // binary's malloc is glibc's unless built with jemalloc (//third_party:malloc), which ignores this.
#if defined(__GLIBC__)
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 16 << 20);
#endif
  // Several traces: one process replays them in turn (the CUDA driver and context start once), and with --json
  // standard output is {"traces": [each trace's answer], then the totals}.
  Totals totals;
  int64_t json_traces = 0;  // the elements of "traces" written so far
  const auto open_json = [&](std::ostream& to) { to << (json_traces++ == 0 ? "{\n  \"traces\": [\n    " : ",\n    "); };
  const auto close_json = [&](const std::string& error) {
    if (json_traces == 0) return;  // nothing written: a refused first trace prints nothing, as one trace alone
    Json tail =
        CountsJson(totals.records, totals.fields, totals.rows_compared, totals.mismatches, totals.first_mismatch);
    if (!error.empty()) tail["error"] = error;
    out << "\n  ]," << tail.dump(2, ' ', false, Json::error_handler_t::replace).substr(1) << "\n";
  };
  // Each trace's replay, in order: --jobs N runs up to N at once, each printing as if alone and in turn (the
  // later ones' text held until the earlier ones are done); the outcomes are judged here, in order.
  struct Replayed {
    TraceOutcome outcome;
    bool ran = false;  // false: the file could not be opened
    Status read;
  };
  std::vector<Replayed> replayed(paths.size());
  OrderedJobs runner(static_cast<int>(paths.size()), jobs, out, [&](int i, OrderedJobs::Output& to) {
    Replayed& r = replayed[i];
    ReplaySettings mine = settings;
    mine.options.cancel = to.cancelled();
    r.read = flags.WithInputPath("trace", paths[i], [&](std::istream& in) {
      r.ran = true;
      std::function<void()> open;
      if (several && settings.json) open = [&] { to.Lead(open_json); };
      r.outcome = ReplayTrace(in, mine, paths[i], several, open, to.stream());
      return Status::Ok();
    });
  });
  Status last = Status::Ok();
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& path = paths[i];
    runner.Wait(static_cast<int>(i));
    const TraceOutcome& o = replayed[i].outcome;
    const bool ran = replayed[i].ran;
    Status read = ran ? o.status : replayed[i].read;
    if (ran && o.answered) totals.Add(path, o.report);
    // The file, a malformed line, a truncated last record or the device ends the command (a mismatch too, unless
    // --keep-going: below). Its message names the trace where there are several.
    if (!read.ok() && (read.code() != StatusCode::kMismatch || o.report.truncated_line != 0)) {
      if (ran && device_check.valid()) KVSHARD_RETURN_IF_ERROR(device_check.get());
      if (read.code() != StatusCode::kMismatch) {
        read = FileError("trace", read);
        const std::string& m = read.message();
        if (several && m.rfind("--trace: " + path + ": ", 0) != 0) {
          read = Status(read.code(), "--trace: " + path + ": " + (m.rfind("--trace: ", 0) == 0 ? m.substr(9) : m));
        }
      }
      runner.Cancel();
      if (several && settings.json) close_json(read.code() == StatusCode::kMismatch ? "" : read.message());
      return read;
    }
    last = read;
    if (!read.ok() && !settings.keep_going) {  // a mismatch without --keep-going: the command's first
      runner.Cancel();
      break;
    }
    runner.Release(static_cast<int>(i));
  }
  if (device_check.valid()) KVSHARD_RETURN_IF_ERROR(device_check.get());
  if (!several) return last;
  if (settings.json) {
    close_json("");
  } else if (last.ok() || settings.keep_going) {
    out << "replayed " << totals.traces << " traces: " << totals.records << " records, " << totals.fields
        << " fields checked, ";
    if (totals.rows_compared > 0) out << totals.rows_compared << " KV rows compared, ";
    out << totals.mismatches << " mismatches\n";
  }
  if (totals.mismatches == 0) return Status::Ok();
  if (!settings.keep_going) return last;
  return Mismatch(totals.mismatches, " mismatches in ", totals.records, " records of ", totals.traces,
                  " traces; first: ", totals.first_mismatch);
}

// A malformed trace names the flag and the line: "--trace: line 2: op: unknown op ..." (mismatches stay "line N");
// with several traces, the trace too: "--trace: b.jsonl: line 2: ...", "b.jsonl: line 4: ...".
// What was printed must have been written: a failed write of standard output is an error, whatever the verdict.
Status Run(const Flags& flags, std::ostream& out) {
  const Status status = Replay(flags, out);
  out.flush();
  if (!out) return InvalidArgument("standard output: write failed");
  return status;
}

}  // namespace

Command ReplayCommand() {
  Command c{"replay", "replay a recorded trace through the reference and report the first decision that differs",
            "FILE|- [FILE...] [--jobs N] [--keep-going] [--json] [--impl ref|fast] [--backend ref|gpu|diff] [--gpus N] "
            "[--full-invariants] "
            "[--read-threads N] [--timing] "
            "[--max-memory BYTES]",
            DeclareFlags, Run};
  c.positional = "trace";
  c.positional_rest = "more-traces";
  return c;
}

}  // namespace kvshard::cli
