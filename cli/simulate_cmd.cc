// kvshard simulate: a recorded serving workload (Mooncake, Azure, BurstGPT, Qwen) through the sharded pool and
// the CP planner (sim/simulator.h): prefix hit rates, per-rank pages, gathered bytes, CP padding, predicted time.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <ostream>
#include <string>

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
      "its format (auto: detected from the first line)")("shard-size", Int(1, 4096)->default_value(8),
                                                         "N, KV shard ranks of the prefill node")(
      "page-size", Int(1, 4096)->default_value(64), "ps, tokens per page")(
      "cp-size", Int(1, 1024)->default_value(1),
      "context-parallel ranks (> 1: a CP split plan per batch, one request per batch as SGLang)")(
      "cache-tokens", NonNegative()->default_value(0), "KV pool capacity in tokens over all ranks; 0 = unbounded")(
      "chunked-prefill-size", Int(-1, int64_t{1} << 40)->default_value(8192),
      "SGLang --chunked-prefill-size: prefill tokens per batch, chunk boundaries floored to the page (-1: off, "
      "only without sharding)")(
      "max-prefill-tokens", Int(1, int64_t{1} << 40)->default_value(16384),
      "SGLang --max-prefill-tokens: prefill tokens per batch (ceiled to pages as SGLang charges them)")(
      "max-running-requests", Int(1, sim::kMaxRunningRequests)->default_value(256),
      "SGLang --max-running-requests: requests holding a slot (in a batch, chunked or transferring)")(
      "context-length", Int(0, int64_t{1} << 40)->default_value(0),
      "the context (0: the model's): longer prompts are refused; sizes the assembly scratch's prefix region")(
      "schedule-policy", Choice({"fcfs", "lpm"})->default_value("fcfs"),
      "SGLang --schedule-policy: fcfs (first come, first served) or lpm (longest prefix match)")(
      "instances", Int(1, 1024)->default_value(1),
      "prefill nodes, each --shard-size ranks with its own pool and radix cache, behind --router")(
      "router", Choice({"round-robin", "least-loaded", "prefix-affinity"})->default_value("round-robin"),
      "how arrivals are spread over the --instances: round-robin, least-loaded (fewest requests not yet "
      "prefilled), prefix-affinity (the node whose routed prompts share at least half the prompt, else "
      "least-loaded)")("time-scale", Real(0, 1e6)->default_value(1.0),
                       "arrival times are multiplied by this (0.5: twice the rate)")(
      "kv-transfer-gbps", Real(0, 1e6, true)->default_value(400.0),
      "each rank's link to the decode side, Gbit/s: a request's pages are released when its KV has arrived")(
      "bootstrap-ms", Real(0, 1e9)->default_value(0.0),
      "the bootstrap handshake with the decode side before a request may be scheduled, ms")(
      "slo-ttft-ms", Real(0, 1e12)->default_value(0.0),
      "time-to-first-token target for goodput, ms (0: none, every request counts)")(
      "model", po::value<std::string>()->value_name("NAME|FILE")->default_value("deepseek-v3"),
      "the served model: deepseek-v3, kimi-k2 (MLA), llama-3-70b, qwen3-235b (GQA), or a JSON file of the same "
      "fields (docs/simulate.md): layers, KV bytes, weights, FLOPs, context")(
      "hbm-gib", Real(0, 1e6)->default_value(139.0),
      "each GPU's memory, GiB (H200: 139 usable): weights / N + KV pool + assembly scratch are checked against "
      "it (0: not checked)")("kv-bytes", Int(0, 1 << 24)->default_value(0),
                             "bytes of one token's KV row per layer (0: the model's; MLA bf16: 1152)")(
      "layers", Int(0, 4096)->default_value(0), "model layers (0: the model's)")(
      "calibration", File()->default_value(kBuiltinCalibrationName),
      "the cost model's calibration: h200 (built in: testdata/calibration/h200.json, fitted to H200 measurements), "
      "a calibration file (kvshard calibrate shows its fits), or none (physical limits, uncalibrated)")(
      "need-sort", po::bool_switch(), "the allocator's need_sort mode")(
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

// A duration for people: "850 us", "12.4 ms", "3.20 s", "12.5 min", "3.1 h".
std::string HumanMs(double ms) {
  char buf[32];
  if (ms < 1) {
    std::snprintf(buf, sizeof buf, "%.0f us", ms * 1e3);
  } else if (ms < 1e3) {
    std::snprintf(buf, sizeof buf, "%.3g ms", ms);
  } else if (ms < 120e3) {
    std::snprintf(buf, sizeof buf, "%.3g s", ms / 1e3);
  } else if (ms < 7200e3) {
    std::snprintf(buf, sizeof buf, "%.3g min", ms / 60e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g h", ms / 3600e3);
  }
  return buf;
}

// Bytes for people, binary units: "512 B", "3.5 KiB", "88.2 GiB".
std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.3g %s", bytes, units[u]);
  return buf;
}

// A count with thousands separators: 144,793,823.
std::string Grouped(double v) {
  std::string digits = std::to_string(static_cast<long long>(std::llround(v)));
  std::string out;
  const size_t lead = digits[0] == '-' ? 1 : 0;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > lead && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

void PrintSummary(const sim::SimResult& r, const sim::SimConfig& c, std::ostream& out) {
  out << std::fixed << std::setprecision(3);
  const std::string nodes = c.instances == 1
                                ? std::string("one prefill node")
                                : StrCat(c.instances, " prefill nodes behind a ", sim::RouterName(c.router), " router");
  out << "simulated " << r.requests << " requests in " << r.batches << " batches on " << nodes << " (N=" << c.shard_size
      << " ps=" << c.page_size << " cp=" << c.cp_size
      << " cache=" << (c.cache_tokens ? Grouped(c.cache_tokens) + " tokens" : std::string("unbounded"))
      << " chunked-prefill-size=" << c.chunked_prefill_size << " " << sim::SchedulePolicyName(c.schedule_policy)
      << ")\n";
  const std::string verdict = sim::Overloaded(r) ? "OVERLOADED" : "keeps up";
  if (c.instances == 1) {
    out << "load: " << verdict << " — batches busy " << HumanMs(r.busy_s * 1e3) << " over "
        << HumanMs(r.arrival_span_s * 1e3) << " of arrivals (utilization ";
    if (r.arrival_span_s > 0) {
      out << std::setprecision(2) << r.utilization << std::setprecision(3);
    } else {  // every request arrived at once: busy time over no time (1e300 in --json)
      out << "unbounded: every request arrived at once";
    }
    out << "); queue peaked at " << r.max_waiting << " requests, " << r.waiting_at_last_arrival
        << " waiting at the last arrival\n";
  } else {
    out << "load: " << verdict << " — the busiest node's batches take " << std::setprecision(2) << r.utilization
        << std::setprecision(3) << " of the " << HumanMs(r.arrival_span_s * 1e3)
        << " of arrivals (all nodes: " << HumanMs(r.busy_s * 1e3) << " busy); one node's queue peaked at "
        << r.max_waiting << " requests\n";
  }
  out << "time to first token: p50 " << HumanMs(r.ttft_ms.p50) << ", p90 " << HumanMs(r.ttft_ms.p90) << ", p99 "
      << HumanMs(r.ttft_ms.p99) << "; queueing p50 " << HumanMs(r.queue_ms.p50) << ", p99 " << HumanMs(r.queue_ms.p99)
      << "; KV transfer p50 " << HumanMs(r.transfer_ms.p50) << "\n";
  out << "throughput: " << Grouped(r.input_tokens_per_s) << " input tokens/s";
  if (c.slo_ttft_ms > 0) {
    out << "; goodput " << std::setprecision(2) << r.goodput_requests_per_s << " requests/s ("
        << Grouped(static_cast<double>(r.slo_met)) << " of " << Grouped(static_cast<double>(r.requests))
        << " within TTFT " << HumanMs(c.slo_ttft_ms) << ")" << std::setprecision(3);
  }
  out << "\n";
  const sim::RankMemory mem = sim::RankMemoryOf(c, r.pool_pages_per_rank, r.pages_in_use_max);
  const bool unbounded = c.cache_tokens == 0;
  const int64_t kv_bytes = unbounded ? mem.kv_peak_bytes : mem.kv_pool_bytes;  // unbounded: what it used
  out << "memory per rank (" << c.model_name << ", " << c.cost.layers << " layers x " << c.kv_bytes_per_token_layer
      << " B a token): weights " << HumanBytes(static_cast<double>(mem.weight_bytes)) << " + KV "
      << (unbounded ? "in use at peak " : "pool ") << HumanBytes(static_cast<double>(kv_bytes))
      << (unbounded ? " (pool unbounded)" : " (peak in use " + HumanBytes(static_cast<double>(mem.kv_peak_bytes)) + ")")
      << " + assembly scratch " << HumanBytes(static_cast<double>(mem.scratch_bytes));
  if (mem.hbm_bytes > 0) {
    const int64_t need = mem.weight_bytes + kv_bytes + mem.scratch_bytes;
    out << " = " << HumanBytes(static_cast<double>(need)) << " of " << HumanBytes(static_cast<double>(mem.hbm_bytes))
        << ": " << (need <= mem.hbm_bytes ? "fits" : "DOES NOT FIT") << "; at most "
        << Grouped(static_cast<double>(mem.max_cache_tokens)) << " cache tokens fit (--cache-tokens)";
  }
  out << "\n";
  out << "prefix hit rate: " << Ratio(r.hit_blocks, r.hash_blocks) << " of hash blocks, "
      << Ratio(r.cached_tokens, r.input_tokens) << " of prompt tokens (" << Grouped(r.cached_tokens) << " / "
      << Grouped(r.input_tokens) << ")\n";
  out << "pages in use per rank: max " << Grouped(r.pages_in_use_max) << " of " << Grouped(r.pool_pages_per_rank)
      << ", mean " << Grouped(r.pages_in_use_mean) << ", skew (max/mean) worst " << r.pages_in_use_skew_max << " mean "
      << r.pages_in_use_skew_mean << "\n";
  out << "scheduling: " << r.no_token_stops << " passes stopped by the KV budget, " << r.scratch_stops
      << " admissions deferred by the assembly scratch, " << r.deferrals << " allocation deferrals; declined grafts "
      << r.declined_grafts << ", duplicate pages " << r.duplicate_pages << ", evicted pages " << r.evicted_pages
      << "\n";
  out << "gathered per layer per batch: p50 " << HumanBytes(r.gathered_bytes_layer.p50) << ", p99 "
      << HumanBytes(r.gathered_bytes_layer.p99) << " (total " << HumanBytes(r.gathered_bytes_layer.total) << ")\n";
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
  out << "batch time (" << c.cost.source << "): p50 " << HumanMs(r.batch_time_us.p50 / 1e3) << ", p99 "
      << HumanMs(r.batch_time_us.p99 / 1e3) << "; simulated clock " << HumanMs(r.simulated_s * 1e3) << "\n";
  if (!r.nodes.empty()) {
    out << "per node (the figures above are the cluster's: utilization, peaks and queue of the busiest node):\n";
    out << "  node  requests  utilization  ttft p50  ttft p99  prefix hit  KV peak/rank\n";
    for (size_t k = 0; k < r.nodes.size(); ++k) {
      const sim::SimResult& n = r.nodes[k];
      char line[160];
      std::snprintf(line, sizeof line, "  %4zu  %8lld  %11.2f  %8s  %8s  %10.3f  %12s\n", k,
                    static_cast<long long>(n.requests), n.utilization, HumanMs(n.ttft_ms.p50).c_str(),
                    HumanMs(n.ttft_ms.p99).c_str(), Ratio(n.cached_tokens, n.input_tokens),
                    HumanBytes(static_cast<double>(n.kv_peak_bytes_per_rank)).c_str());
      out << line;
    }
  }
  out << "invariant violations: " << r.violations << "\n";
}

Status RunSimulate(const Flags& flags, std::ostream& standard_output) {
  KVSHARD_RETURN_IF_ERROR(flags.Require({"workload"}));
  // Every path is checked before anything is read or opened; an output on standard output ("-") moves the
  // summary to standard error.
  KVSHARD_ASSIGN_OR_RETURN(const std::string on_stdout, CheckSimulatePaths(flags));
  std::ostream& out = on_stdout.empty() ? standard_output : std::cerr;
  KVSHARD_ASSIGN_OR_RETURN(sim::SimConfig c, SimConfigFromFlags(flags));  // cli/sim_sweep.h: the knobs --sweep sets
  if (const std::string name = flags.String("calibration"); name != kNoCalibrationName) {
    KVSHARD_ASSIGN_OR_RETURN(const sim::Calibration cal, ReadCalibrationFlag(flags));
    c.cost = sim::Calibrated(c.cost, cal,
                             "calibrated on " + cal.device + " (" +
                                 (name == kBuiltinCalibrationName ? "built in, testdata/calibration/h200.json" : name) +
                                 ")");
  }
  if (!flags.Has("sweep") && flags.Given("threads")) {
    return InvalidArgument("--threads: does not apply without --sweep (one run is one thread)");
  }
  // One node has nothing to route, unless a sweep gives it more.
  const auto sweeps_instances = [&flags] {
    if (!flags.Has("sweep")) return false;
    const std::vector<std::string>& axes = flags.StringList("sweep");
    return std::any_of(axes.begin(), axes.end(), [](const std::string& a) { return a.rfind("instances=", 0) == 0; });
  };
  if (c.instances == 1 && flags.Given("router") && !sweeps_instances()) {
    return InvalidArgument("--router: applies only with --instances above 1 (one prefill node has no router)");
  }
  if (flags.Has("sweep")) {  // cli/sim_sweep.h; --csv names the rows' CSV file there
    for (const char* flag : {"timeline", "emit-trace"}) {
      if (flags.Given(flag)) return InvalidArgument("--", flag, ": not with --sweep (one run's file; run it alone)");
    }
    return RunSweep(flags, c, DeclareFlags, out, standard_output);
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
    KVSHARD_RETURN_IF_ERROR(Budget(flags).Check("--cache-tokens", "simulated pool",
                                                c.shard_size * (cache_pages_per_rank + 1), "logical pages",
                                                kSimBytesPerPage));
  }
  if (c.instances > 1) {  // refused before any output file is opened (and so created or truncated)
    for (const char* flag : {"timeline", "csv", "plots", "emit-trace"}) {
      if (flags.Has(flag)) {
        return InvalidArgument("--", flag, ": records one node; not with --instances ", c.instances);
      }
    }
  }
  KVSHARD_ASSIGN_OR_RETURN(SimulateOutputs outputs, SimulateOutputs::Prepare(flags, standard_output));
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
      SimulateForCli(flags, workload, c, progress, outputs.any() ? &record : nullptr, &emitted, standard_output);
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

// The simulator's errors name SimConfig fields (simulate says them as its flags) and requests by their index in the
// workload ("requests[3].input_length: ...": said as the --workload's).
Status Run(const Flags& flags, std::ostream& out) {
  Status s = SpellFlags(RunSimulate(flags, out), SimFlagNames());
  if (s.code() == StatusCode::kInvalidArgument && s.message().rfind("requests[", 0) == 0) {
    return InvalidArgument("--workload: ", s.message());
  }
  return s;
}

}  // namespace

Command SimulateCommand() {
  Command c{"simulate",
            "simulate a serving workload on SGLang's sharded prefill node(s): load, TTFT, memory, prefix hits, plans",
            "FILE|- [--model M] [--shard-size N] [--page-size P] [--cache-tokens T] [--instances K --router R] "
            "[--time-scale S] [--json] [--timeline F] [--csv DIR] [--plots DIR] "
            "[--emit-trace FILE [--emit-max-batches B] [--emit-layers L]]\n"
            "FILE --sweep FLAG=V,V,... [--sweep FLAG=V,...] [--threads T] [--json] [--csv OUT.csv] [--plots DIR]",
            DeclareFlags, Run};
  c.positional = "workload";
  return c;
}

}  // namespace kvshard::cli
