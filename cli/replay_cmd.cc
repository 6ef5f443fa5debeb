// kvshard replay: runs a trace (docs/trace-format.md) through the reference model and reports the first
// decision that differs from it, by line and field (exit 1), or a malformed line (exit 2).
#include <functional>
#include <ostream>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/memory_limit.h"
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
      "print a JSON summary: records, fields_checked, rows_compared, mismatches, "
      "first_mismatch")("backend", BackendValue(),
                        "where the pool pipeline's records move data: ref, gpu (CUDA; reads checked "
                        "against the unsharded pool) or diff (both; every plan and byte compared)")(
      "impl", ImplValue(),
      "who builds gather_plan, split and rerange plans: ref (the reference) or fast "
      "(cpu_fast/; replaying a recorded trace with it diffs the fast paths against the engine)")(
      "gpus", Int(1, 1024)->default_value(1),
      "with --backend gpu|diff: 1 emulates the trace's N ranks on GPU 0; N drives N "
      "GPUs through NCCL");
  DeclareMaxMemoryFlag(flags);
}

void PrintSummary(const replay::ReplaySummary& s, int64_t rows, bool json, std::ostream& out) {
  if (json) {
    Json j;
    j["records"] = s.records;
    j["fields_checked"] = s.fields;
    j["rows_compared"] = rows;
    j["mismatches"] = s.mismatches;
    j["first_mismatch"] = s.first_mismatch.empty() ? Json(nullptr) : Json(s.first_mismatch);
    PrintJson(j, out);
  } else {
    out << "replayed " << s.records << " records, " << s.fields << " fields checked, ";
    if (rows > 0) out << rows << " KV rows compared, ";
    out << s.mismatches << " mismatches\n";
  }
}

Status Replay(std::istream& in, const Flags& flags, std::ostream& out) {
  replay::ReplayOptions options;
  KVSHARD_ASSIGN_OR_RETURN(options.backend, BackendFlag(flags));
  options.impl = ImplFlag(flags);
  options.max_memory = MaxMemory(flags);
  options.line_check = LineMemoryCheck(options.max_memory);
#ifdef KVSHARD_HAVE_CUDA
  const int gpus = static_cast<int>(flags.Int("gpus"));
  options.make_device = [gpus](const replay::PoolGeometry& g) { return replay::CreateGpuPoolPath(g, gpus); };
#endif
  const bool json = flags.Bool("json");
  replay::ReplayReport report;
  const Status status = replay::ReplayStream(
      in, options, &report,
      flags.Bool("keep-going") ? [&out](const Status& m) { out << "mismatch: " << m.message() << "\n"; }
                               : std::function<void(const Status&)>());
  const replay::ReplaySummary& s = report.summary;
  if (status.code() == StatusCode::kMismatch) {  // the first one, without --keep-going
    if (json) PrintSummary(s, report.rows_compared, true, out);
    return status;
  }
  KVSHARD_RETURN_IF_ERROR(status);
  PrintSummary(s, report.rows_compared, json, out);
  if (s.mismatches > 0)
    return Mismatch(s.mismatches, " mismatches in ", s.records, " records; first: ", s.first_mismatch);
  return Status::Ok();
}

// A malformed trace names the flag and the line: "--trace: line 2: op: unknown op ..." (mismatches stay "line N").
Status Run(const Flags& flags, std::ostream& out) {
  return FileError("trace", flags.WithInput("trace", [&](std::istream& in) { return Replay(in, flags, out); }));
}

}  // namespace

Command ReplayCommand() {
  Command c{"replay", "replay a recorded trace through the reference and report the first decision that differs",
            "FILE|- [--keep-going] [--json] [--impl ref|fast] [--backend ref|gpu|diff] [--gpus N] [--max-memory BYTES]",
            DeclareFlags, Run};
  c.positional = "trace";
  return c;
}

}  // namespace kvshard::cli
