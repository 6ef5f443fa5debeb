// kvshard bench: nccl-tests-style GPU benchmark rows, each with a correctness check and a same-run limit.
// Flags are checked first, so bad input is exit 2 on any machine; without a usable GPU the command exits 3.
#include <algorithm>
#include <cstdio>
#include <ostream>

#include "cli/cli_util.h"
#include "cli/commands.h"
#ifdef KVSHARD_HAVE_CUDA
#include "bench/gpu_bench.h"
#endif

namespace kvshard::cli {
namespace {

// --op's choices (kebab-case; the benchmarks' own names use '_').
const std::vector<std::string> kOps = {"all",         "plan",        "rerange",   "gather-rows",
                                       "owner-write", "stage-chunk", "allgather", "prefix-gather"};

void DeclareFlags(po::options_description& flags) {
  flags.add_options()(
      "op",
      ChoiceList(kOps, {{"gather_rows", "gather-rows"},
                        {"owner_write", "owner-write"},
                        {"stage_chunk", "stage-chunk"},
                        {"prefix_gather", "prefix-gather"}})
          ->value_name("OP,...")
          ->default_value({"all"}, "all"),
      ("benchmarks to run, of: " + JoinChoices(kOps, " and ") + " (the device copy, the kernels' limit, always runs)")
          .c_str())("min-bytes", Int(1, int64_t{1} << 34)->default_value(int64_t{1} << 20),
                    "smallest payload in bytes")("max-bytes", Int(1, int64_t{1} << 34)->default_value(int64_t{1} << 28),
                                                 "largest payload in bytes")("factor", Int(2, 1024)->default_value(4),
                                                                             "payload growth factor between rows")(
      "row-bytes", Int(4, int64_t{1} << 20)->default_value(1152),
      "bytes per KV row, a multiple of 4 (1152 = MLA latent 576 x bf16)")("gpus", Int(0, 64)->default_value(0),
                                                                          "GPUs for collectives (0 = all visible)")(
      "layers", Int(1, 1024)->default_value(32), "layers in the prefix-gather pipeline")(
      "compute-us", Int(0, 1000000)->default_value(0), "per-layer compute stand-in in us (0 = 1.25x gather)")(
      "warmup", Int(0, 1000)->default_value(5), "untimed iterations")(
      "iters", Int(1, 100000)->default_value(20), "timed iterations")("batch-size", Int(1, 512)->default_value(256),
                                                                      "requests in the plan benchmark")(
      "compute-blocks", Int(0, 65535)->default_value(0), "blocks of the compute stand-in (0 = one per SM)")(
      "collective-timeout-ms", Int(0, int64_t{1} << 40)->default_value(0),
      "deadline of every collective wait; on expiry the communicator is aborted and the command exits 3 (0 = "
      "$KVSHARD_COLLECTIVE_TIMEOUT_MS, else 300000)")("trace", po::bool_switch(),
                                                      "also print rank 0's device timeline of one prefix-gather batch")(
      "json", po::bool_switch(), "print JSON instead of the table");
}

// The checks that involve more than one flag (each flag's own range is declared with it).
Status CheckFlags(const Flags& flags) {
  if (flags.Int("max-bytes") < flags.Int("min-bytes")) {
    return InvalidArgument("--max-bytes: must be >= --min-bytes (", flags.Int("min-bytes"), "), got ",
                           flags.Int("max-bytes"));
  }
  if (flags.Int("row-bytes") % 4 != 0) {
    return InvalidArgument("--row-bytes: must be a multiple of 4, got ", flags.Int("row-bytes"));
  }
  return Status::Ok();
}

#ifdef KVSHARD_HAVE_CUDA
bench::BenchOptions Options(const Flags& flags) {
  bench::BenchOptions opt;
  for (std::string op : flags.StringList("op")) {
    std::replace(op.begin(), op.end(), '-', '_');  // the benchmarks' own names
    opt.ops.push_back(op);
  }
  opt.min_bytes = flags.Int("min-bytes");
  opt.max_bytes = flags.Int("max-bytes");
  opt.factor = flags.Int("factor");
  opt.row_bytes = flags.Int("row-bytes");
  opt.gpus = static_cast<int>(flags.Int("gpus"));
  opt.layers = flags.Int("layers");
  opt.compute_us = flags.Int("compute-us");
  opt.warmup = static_cast<int>(flags.Int("warmup"));
  opt.iters = static_cast<int>(flags.Int("iters"));
  opt.batch = flags.Int("batch-size");
  opt.compute_blocks = static_cast<int>(flags.Int("compute-blocks"));
  opt.trace = flags.Bool("trace");
  opt.collective_timeout_ms = flags.Int("collective-timeout-ms");
  return opt;
}

void PrintTable(const std::string& device, const std::vector<bench::BenchRow>& rows, std::ostream& out) {
  char line[1024];
  std::snprintf(line, sizeof(line), "# %-22s %12s %11s %10s %10s %8s %-9s %7s  %s\n", "op", "size(B)", "time(us)",
                "algbw", "busbw", "%limit", "limit", "#wrong", "note");
  out << "# device: " << device << "\n" << line;
  for (const bench::BenchRow& r : rows) {
    std::snprintf(line, sizeof(line), "  %-22s %12lld %11.2f %10.2f %10.2f %8.1f %-9s %7lld  ", r.op.c_str(),
                  static_cast<long long>(r.bytes), r.time_us, r.algbw_gbs, r.busbw_gbs, r.pct_limit, r.limit.c_str(),
                  static_cast<long long>(r.wrong));
    out << line << r.note << "\n";
  }
  out << "# bandwidths in GB/s; busbw = bytes read+written per second for kernels, NCCL bus bandwidth for "
         "collectives\n";
}

Status RunOnGpu(const Flags& flags, std::ostream& out) {
  std::vector<bench::BenchRow> rows;
  std::string device;
  KVSHARD_RETURN_IF_ERROR(bench::RunGpuBench(Options(flags), &rows, &device));
  int64_t wrong = 0;
  for (const bench::BenchRow& r : rows) wrong += r.wrong;
  if (flags.Bool("json")) {
    Json j;
    j["device"] = device;
    j["rows"] = Json::array();
    for (const bench::BenchRow& r : rows) {
      j["rows"].push_back({{"op", r.op},
                           {"bytes", r.bytes},
                           {"time_us", r.time_us},
                           {"algbw_gbs", r.algbw_gbs},
                           {"busbw_gbs", r.busbw_gbs},
                           {"pct_limit", r.pct_limit},
                           {"limit", r.limit},
                           {"wrong", r.wrong},
                           {"note", r.note}});
    }
    PrintJson(j, out);
  } else {
    PrintTable(device, rows, out);
  }
  if (wrong != 0) return Mismatch("bench: ", wrong, " rows failed the correctness check");
  return Status::Ok();
}
#endif

Status Run(const Flags& flags, std::ostream& out) {
  KVSHARD_RETURN_IF_ERROR(CheckFlags(flags));
  KVSHARD_RETURN_IF_ERROR(GpuAvailable("bench"));
#ifdef KVSHARD_HAVE_CUDA
  return RunOnGpu(flags, out);
#else
  (void)out;
  return Status::Ok();  // not reached: GpuAvailable fails without the CUDA backend
#endif
}

}  // namespace

Command BenchCommand() {
  return {"bench",
          "GPU benchmarks with correctness checks, against limits measured in the same run",
          "[--op OP,...] [--min-bytes INT] [--max-bytes INT] [--factor INT] [--gpus INT] [--json]",
          DeclareFlags,
          Run,
          {{"batch", "batch-size"}}};
}

}  // namespace kvshard::cli
