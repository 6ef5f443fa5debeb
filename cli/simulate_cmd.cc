// kvshard simulate: a recorded serving workload (Mooncake, Azure, BurstGPT, Qwen) through the sharded pool and
// the CP planner (sim/simulator.h): prefix hit rates, per-rank pages, gathered bytes, CP padding, predicted time.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <ostream>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/memory_limit.h"
#include "cli/simulate_outputs.h"
#include "cli/sim_sweep.h"
#include "cli/simulate_emit.h"
#include "core/workload.h"
#include "sim/calibration.h"
#include "sim/result_json.h"
#include "sim/simulator.h"

namespace kvshard::cli {
namespace {

void DeclareFlags(po::options_description& flags) {
  flags.add_options()("workload", File(), "the workload file (also given without the flag); - reads standard input")(
      "format", Choice({"auto", "mooncake", "azure", "burstgpt", "qwen"})->default_value("auto"),
      "its format (auto: detected from the first line)")(
      "shard-size", Int(1, 4096)->default_value(8), "N, KV shard ranks")("page-size", Int(1, 4096)->default_value(64),
                                                                         "ps, tokens per page")(
      "cp-size", Int(1, 1024)->default_value(1), "context-parallel ranks (> 1: a CP split plan per batch)")(
      "cache-tokens", NonNegative()->default_value(0), "KV pool capacity in tokens over all ranks; 0 = unbounded")(
      "chunk-tokens", Positive()->default_value(8192), "most prefill tokens of one request per batch (multiple of ps)")(
      "max-batch-tokens", Positive()->default_value(16384), "most prefill tokens per batch")(
      "max-batch-requests", Positive()->default_value(256), "most requests per batch")(
      "time-scale", Real(0, 1e6)->default_value(1.0), "arrival times are multiplied by this (0.5: twice the rate)")(
      "decode-tokens-per-s", Real(0, 1e9, true)->default_value(50.0),
      "decode speed per request: a request holds "
      "its pages output_length / rate seconds")("kv-bytes", Positive()->default_value(1152),
                                                "bytes of one token's KV row per layer (MLA bf16: 1152)")(
      "layers", Int(1, 4096)->default_value(61), "model layers (the cost model's per-layer phases)")(
      "calibration", File(),
      "a cost-model calibration (testdata/calibration/h200.json; kvshard calibrate shows "
      "its fits); without it the cost model uses physical limits")("need-sort", po::bool_switch(),
                                                                   "the allocator's need_sort mode")(
      "alloc-mode", Choice({"rotated", "owners"})->default_value("rotated"),
      "rotated: SGLang's page-interleave allocator; owners (with --cp-size > 1, which must divide --shard-size): "
      "every new page from its CP compute owner's class, so CP shared-KV direct writes never fail the owner check")(
      "quiet", po::bool_switch(), "no progress bar on standard error")("json", po::bool_switch(),
                                                                       "print one JSON object instead of the summary");
  DeclareSimulateOutputFlags(flags);
  DeclareSweepFlags(flags);  // cli/sim_sweep.h
  DeclareEmitTraceFlags(flags);
  DeclareMaxMemoryFlag(flags);
}

// Bytes per logical page of a bounded pool (--cache-tokens): the allocator's lists and flags, the radix cache's
// nodes and token keys, and the simulator's per-page state (an upper estimate; docs/RELIABILITY.md "Limits").
constexpr int64_t kSimBytesPerPage = 128;

double Ratio(int64_t a, int64_t b) { return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b); }

void PrintSummary(const sim::SimResult& r, const sim::SimConfig& c, std::ostream& out) {
  out << std::fixed << std::setprecision(3);
  out << "simulated " << r.requests << " requests in " << r.batches << " batches (N=" << c.shard_size
      << " ps=" << c.page_size << " cp=" << c.cp_size
      << " cache=" << (c.cache_tokens ? std::to_string(c.cache_tokens) + " tokens" : std::string("unbounded")) << ")\n";
  out << "prefix hit rate: " << Ratio(r.hit_blocks, r.hash_blocks) << " of hash blocks, "
      << Ratio(r.cached_tokens, r.input_tokens) << " of prompt tokens (" << r.cached_tokens << " / " << r.input_tokens
      << ")\n";
  out << "pages in use per rank: max " << r.pages_in_use_max << " of " << r.pool_pages_per_rank << ", mean "
      << r.pages_in_use_mean << ", skew (max/mean) worst " << r.pages_in_use_skew_max << " mean "
      << r.pages_in_use_skew_mean << "\n";
  out << "deferrals " << r.deferrals << ", declined grafts " << r.declined_grafts << ", duplicate pages "
      << r.duplicate_pages << ", evicted pages " << r.evicted_pages << "\n";
  out << "gathered bytes per layer per batch: total " << r.gathered_bytes_layer.total << ", p50 "
      << r.gathered_bytes_layer.p50 << ", p99 " << r.gathered_bytes_layer.p99 << "\n";
  if (c.cp_size > 1)
    out << "CP compute padding: " << Ratio(r.cp_padding_tokens, r.cp_compute_tokens) << " of computed tokens\n";
  if (c.cp_size > 1) {
    out << "CP shared-KV direct writes (--alloc-mode " << sim::AllocModeName(c.alloc_mode)
        << "): " << r.owner_mismatch_pages << " of " << r.direct_write_pages << " pages fail the owner check "
        << "(local_loc_owner_mismatch) in " << r.direct_write_failed_batches << " of " << r.batches << " batches ("
        << r.direct_write_failed_ranks << " rank writes); SGLang's prefix gather rejects " << r.gather_plan_rejections
        << " batches (non-cyclic owners); " << r.class_exhausted_deferrals << " deferrals with pages free in other "
        << "classes\n";
    out << "KV sharding with direct writes: "
        << (sim::RunTogether(r) ? "runs together on this workload" : "does not run together on this workload") << "\n";
  }
  out << "predicted batch time (" << c.cost.source << "): p50 " << r.batch_time_us.p50 << " us, p99 "
      << r.batch_time_us.p99 << " us, total " << r.batch_time_us.total / 1e6 << " s; simulated clock " << r.simulated_s
      << " s\n";
  out << "invariant violations: " << r.violations << "\n";
}

Status RunSimulate(const Flags& flags, std::ostream& out) {
  KVSHARD_RETURN_IF_ERROR(flags.Require({"workload"}));
  sim::SimConfig c = SimConfigFromFlags(flags);  // cli/sim_sweep.h: the knobs --sweep sets too
  if (flags.Has("calibration")) {
    KVSHARD_ASSIGN_OR_RETURN(const sim::Calibration cal, ReadCalibrationFlag(flags));
    c.cost = sim::Calibrated(c.cost, cal, "calibrated on " + cal.device + " (" + flags.String("calibration") + ")");
  }
  if (flags.Has("sweep")) {  // cli/sim_sweep.h; --csv names the rows' CSV file there
    for (const char* flag : {"timeline", "plots", "emit-trace"}) {
      if (flags.Given(flag)) return InvalidArgument("--", flag, ": not with --sweep (one run's file; run it alone)");
    }
    return RunSweep(flags, c, DeclareFlags, out);
  }
  KVSHARD_RETURN_IF_ERROR(sim::ValidateSimConfig(c));
  if (c.alloc_mode == sim::AllocMode::kOwners && flags.Has("emit-trace")) {
    return InvalidArgument(
        "--alloc-mode: owners cannot be emitted with --emit-trace (the trace's alloc records "
        "replay the rotated allocator)");
  }
  // The bounded pool the simulator builds (one past the allocator's 2^24 pages is the model's error; an
  // unbounded pool is sized from the workload, within the 2^24).
  const int64_t cache_pages_per_rank = c.cache_tokens / (c.shard_size * c.page_size);
  if (cache_pages_per_rank >= 1 && c.shard_size * (cache_pages_per_rank + 2) <= (int64_t{1} << 24)) {
    KVSHARD_RETURN_IF_ERROR(CheckMemory("--cache-tokens", "simulated pool", c.shard_size * (cache_pages_per_rank + 1),
                                        "logical pages", kSimBytesPerPage, MaxMemory(flags)));
  }
  KVSHARD_ASSIGN_OR_RETURN(SimulateOutputs outputs, SimulateOutputs::Prepare(flags));
  KVSHARD_ASSIGN_OR_RETURN(const Workload workload, ReadWorkloadFlag(flags));
  // A progress bar on a terminal, once the run has taken a second.
  const bool bar = !flags.Bool("quiet") && isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  bool drawn = false;
  sim::SimProgress progress = [&](int64_t done, int64_t total) {
    if (!bar || (done % 64 != 0 && done != total)) return;
    if (std::chrono::steady_clock::now() - start < std::chrono::seconds(1)) return;
    std::fprintf(stderr, "\rsimulating: %lld / %lld requests (%3d%%)", static_cast<long long>(done),
                 static_cast<long long>(total), static_cast<int>(100 * done / total));
    drawn = true;
  };
  sim::SimRecord record;  // filled only when an output file was asked for
  Json emitted;           // --emit-trace: the trace written
  StatusOr<sim::SimResult> r =
      SimulateForCli(flags, workload, c, progress, outputs.any() ? &record : nullptr, &emitted);
  if (drawn) std::fprintf(stderr, "\n");
  if (!r.ok()) return r.status();
  if (flags.Bool("json")) {
    Json j = sim::ResultJson(*r, c);
    if (!emitted.is_null()) j["emitted_trace"] = emitted;
    PrintJson(j, out);
  } else {
    PrintSummary(*r, c, out);
    if (!emitted.is_null()) {
      out << "trace: " << emitted["path"].get<std::string>() << ": " << emitted["records"] << " records, "
          << emitted["batches"] << " batches" << (emitted["truncated"].get<bool>() ? " (--emit-max-batches)" : "")
          << ", " << emitted["bytes"] << " bytes; replay it with kvshard replay " << emitted["path"].get<std::string>()
          << "\n";
    }
  }
  if (outputs.any()) KVSHARD_RETURN_IF_ERROR(outputs.Write(record));
  if (r->violations > 0) return Mismatch("invariant violated: ", r->first_violation);
  return Status::Ok();
}

// The simulator's errors name SimConfig fields; simulate says them as its flags.
Status Run(const Flags& flags, std::ostream& out) { return SpellFlags(RunSimulate(flags, out), SimFlagNames()); }

}  // namespace

Command SimulateCommand() {
  Command c{"simulate", "simulate a serving workload through the sharded pool and the CP planner",
            "FILE|- [--format F] [--shard-size N] [--page-size P] [--cp-size C] [--alloc-mode rotated|owners] "
            "[--cache-tokens T] [--json] "
            "[--emit-trace FILE [--emit-max-batches B] [--emit-layers L]]\n"
            "FILE --sweep FLAG=V,V,... [--sweep FLAG=V,...] [--threads T] [--json] [--csv OUT.csv]",
            DeclareFlags, Run};
  c.positional = "workload";
  return c;
}

}  // namespace kvshard::cli
