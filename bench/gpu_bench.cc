// RunGpuBench: per payload size, the limits first (device copy, and the raw all-gather inside the collectives'
// benchmarks), then the selected kernels and the layer-ahead prefix gather against them.
#include "bench/gpu_bench.h"

#include <algorithm>
#include <string>

#include "bench/bench_util.h"
#include "bench/ops.h"
#include "gpu/device.h"

namespace kvshard::bench {
namespace {

bool Wants(const BenchOptions& opt, const std::string& op) {
  return std::find(opt.ops.begin(), opt.ops.end(), "all") != opt.ops.end() ||
         std::find(opt.ops.begin(), opt.ops.end(), op) != opt.ops.end();
}

}  // namespace

Status RunGpuBench(const BenchOptions& opt, std::vector<BenchRow>* rows, std::string* device) {
  if (opt.factor < 2) return InvalidArgument("--factor: must be >= 2, got ", opt.factor);
  std::string why;
  const int visible = gpu::VisibleDeviceCount(&why);
  if (visible == 0) return Unavailable("bench: no CUDA device visible (", why, ")");
  BenchContext c{opt, rows};
  c.gpus = opt.gpus > 0 ? opt.gpus : visible;
  if (c.gpus > visible) return InvalidArgument("--gpus: ", c.gpus, " requested, ", visible, " visible");
  *device = std::to_string(c.gpus) + " x " + gpu::DeviceDescription(0);
  if (Wants(opt, "plan")) KVSHARD_RETURN_IF_ERROR(BenchPlan(c));
  // Overflow-safe growth: stop before bytes * factor could pass max_bytes (or int64).
  for (int64_t bytes = opt.min_bytes; bytes <= opt.max_bytes;
       bytes = bytes > opt.max_bytes / opt.factor ? opt.max_bytes + 1 : bytes * opt.factor) {
    const int64_t b = bytes / opt.row_bytes * opt.row_bytes;
    if (b == 0) continue;
    KVSHARD_RETURN_IF_ERROR(BenchCopy(c, b));
    if (Wants(opt, "gather_rows")) KVSHARD_RETURN_IF_ERROR(BenchGatherRows(c, b));
    if (Wants(opt, "owner_write")) KVSHARD_RETURN_IF_ERROR(BenchOwnerWrite(c, b));
    if (Wants(opt, "stage_chunk")) KVSHARD_RETURN_IF_ERROR(BenchStageChunk(c, b));
    if (Wants(opt, "rerange")) KVSHARD_RETURN_IF_ERROR(BenchRerange(c, b));
    if (Wants(opt, "allgather") && c.gpus > 1) KVSHARD_RETURN_IF_ERROR(BenchAllGather(c, b));
    if (Wants(opt, "prefix_gather") && c.gpus > 1) KVSHARD_RETURN_IF_ERROR(BenchPrefixGather(c, b));
  }
  return Status::Ok();
}

}  // namespace kvshard::bench
