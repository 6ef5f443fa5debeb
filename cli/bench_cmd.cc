// kvshard bench: nccl-tests-style GPU benchmark rows, each with a correctness check and a same-run limit.
#include <cstdio>

#include "cli/cli_util.h"
#include "cli/commands.h"
#ifdef KVSHARD_HAVE_CUDA
#include "cli/gpu_bench.h"
#endif

namespace kvshard::cli {
namespace {

Status Run(const std::vector<std::string>& args, bool* help) {
  po::options_description desc("bench flags");
  desc.add_options()
      ("op", po::value<std::string>()->default_value("all"),
       "comma list of: all, plan, rerange, gather_rows, owner_write, stage_chunk, allgather, prefix_gather (copy always runs)")
      ("min-bytes", po::value<std::string>()->default_value("1048576"), "smallest payload in bytes")
      ("max-bytes", po::value<std::string>()->default_value("268435456"), "largest payload in bytes")
      ("factor", po::value<std::string>()->default_value("4"), "payload growth factor between rows")
      ("row-bytes", po::value<std::string>()->default_value("1152"), "bytes per KV row (1152 = MLA latent 576 x bf16)")
      ("gpus", po::value<std::string>()->default_value("0"), "GPUs for collectives (0 = all visible)")
      ("layers", po::value<std::string>()->default_value("32"), "layers in the prefix-gather pipeline")
      ("compute-us", po::value<std::string>()->default_value("0"), "per-layer compute stand-in (0 = 1.25x gather)")
      ("warmup", po::value<std::string>()->default_value("5"), "untimed iterations")
      ("iters", po::value<std::string>()->default_value("20"), "timed iterations")
      ("batch", po::value<std::string>()->default_value("256"), "requests in the plan benchmark")
      ("compute-blocks", po::value<std::string>()->default_value("0"), "blocks of the compute stand-in (0 = one per SM)")
      ("trace", po::bool_switch(), "also print rank 0's device timeline of one prefix-gather batch")
      ("json", po::bool_switch(), "print JSON instead of the table");
  KVSHARD_ASSIGN_OR_RETURN(po::variables_map vm, ParseFlags("bench", "[--op all] [--min-bytes B] [--max-bytes B] [--json]", desc, args, help));
  if (*help) return Status::Ok();
#ifndef KVSHARD_HAVE_CUDA
  return Unavailable("bench: GPU support not built (no CUDA toolkit found at build time)");
#else
  BenchOptions opt;
  KVSHARD_ASSIGN_OR_RETURN(std::string ops, RequiredString(vm, "op"));
  for (size_t start = 0;;) {
    size_t comma = ops.find(',', start);
    opt.ops.push_back(ops.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  for (const std::string& op : opt.ops) {
    if (op != "all" && op != "gather_rows" && op != "owner_write" && op != "stage_chunk" && op != "allgather" &&
        op != "prefix_gather" && op != "plan" && op != "rerange") {
      return InvalidArgument("--op: unknown benchmark '", op, "'");
    }
  }
  KVSHARD_ASSIGN_OR_RETURN(opt.min_bytes, IntFlag(vm, "min-bytes"));
  KVSHARD_ASSIGN_OR_RETURN(opt.max_bytes, IntFlag(vm, "max-bytes"));
  KVSHARD_ASSIGN_OR_RETURN(opt.factor, IntFlag(vm, "factor"));
  KVSHARD_ASSIGN_OR_RETURN(opt.row_bytes, IntFlag(vm, "row-bytes"));
  KVSHARD_ASSIGN_OR_RETURN(int64_t gpus, IntFlag(vm, "gpus"));
  KVSHARD_ASSIGN_OR_RETURN(opt.layers, IntFlag(vm, "layers"));
  KVSHARD_ASSIGN_OR_RETURN(opt.compute_us, IntFlag(vm, "compute-us"));
  KVSHARD_ASSIGN_OR_RETURN(int64_t warmup, IntFlag(vm, "warmup"));
  KVSHARD_ASSIGN_OR_RETURN(int64_t iters, IntFlag(vm, "iters"));
  KVSHARD_ASSIGN_OR_RETURN(opt.batch, IntFlag(vm, "batch"));
  if (opt.batch < 1 || opt.batch > 512) return InvalidArgument("--batch: must be in [1, 512], got ", opt.batch);
  if (opt.min_bytes < 1 || opt.min_bytes > (int64_t{1} << 34)) return InvalidArgument("--min-bytes: must be in [1, 2^34]");
  if (opt.max_bytes < opt.min_bytes || opt.max_bytes > (int64_t{1} << 34)) return InvalidArgument("--max-bytes: must be in [min-bytes, 2^34]");
  if (opt.factor < 2) return InvalidArgument("--factor: must be >= 2, got ", opt.factor);
  if (opt.row_bytes < 4 || opt.row_bytes > (1 << 20) || opt.row_bytes % 4) return InvalidArgument("--row-bytes: must be a multiple of 4 in [4, 2^20]");
  if (gpus < 0 || gpus > 64) return InvalidArgument("--gpus: must be in [0, 64], got ", gpus);
  if (opt.layers < 1 || opt.layers > 1024) return InvalidArgument("--layers: must be in [1, 1024]");
  if (opt.compute_us < 0 || opt.compute_us > 1000000) return InvalidArgument("--compute-us: must be in [0, 1e6]");
  if (warmup < 0 || warmup > 1000) return InvalidArgument("--warmup: must be in [0, 1000]");
  if (iters < 1 || iters > 100000) return InvalidArgument("--iters: must be in [1, 100000]");
  opt.gpus = static_cast<int>(gpus);
  opt.trace = vm["trace"].as<bool>();
  KVSHARD_ASSIGN_OR_RETURN(int64_t compute_blocks, IntFlag(vm, "compute-blocks"));
  if (compute_blocks < 0 || compute_blocks > 65535) return InvalidArgument("--compute-blocks: must be in [0, 65535]");
  opt.compute_blocks = static_cast<int>(compute_blocks);
  opt.warmup = static_cast<int>(warmup);
  opt.iters = static_cast<int>(iters);
  std::vector<BenchRow> rows;
  std::string device;
  KVSHARD_RETURN_IF_ERROR(RunGpuBench(opt, &rows, &device));
  int64_t wrong = 0;
  for (const BenchRow& r : rows) wrong += r.wrong;
  if (vm["json"].as<bool>()) {
    Json j;
    j["device"] = device;
    j["rows"] = Json::array();
    for (const BenchRow& r : rows) {
      j["rows"].push_back({{"op", r.op}, {"bytes", r.bytes}, {"time_us", r.time_us}, {"algbw_gbs", r.algbw_gbs},
                           {"busbw_gbs", r.busbw_gbs}, {"pct_limit", r.pct_limit}, {"limit", r.limit},
                           {"wrong", r.wrong}, {"note", r.note}});
    }
    PrintJson(j);
  } else {
    std::printf("# device: %s\n", device.c_str());
    std::printf("# %-22s %12s %11s %10s %10s %8s %-9s %7s  %s\n", "op", "size(B)", "time(us)", "algbw", "busbw",
                "%limit", "limit", "#wrong", "note");
    for (const BenchRow& r : rows) {
      std::printf("  %-22s %12lld %11.2f %10.2f %10.2f %8.1f %-9s %7lld  %s\n", r.op.c_str(),
                  static_cast<long long>(r.bytes), r.time_us, r.algbw_gbs, r.busbw_gbs, r.pct_limit, r.limit.c_str(),
                  static_cast<long long>(r.wrong), r.note.c_str());
    }
    std::printf("# bandwidths in GB/s; busbw = bytes read+written per second for kernels, NCCL bus bandwidth for collectives\n");
  }
  if (wrong != 0) return Mismatch("bench: ", wrong, " rows failed the correctness check");
  return Status::Ok();
#endif
}

}  // namespace

int RunBench(const std::vector<std::string>& args) {
  bool help = false;
  Status s = Run(args, &help);
  return s.ok() ? 0 : Fail(s);
}

}  // namespace kvshard::cli
