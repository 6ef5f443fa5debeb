// The collectives' limit: a raw in-place ncclAllGather of the payload per rank over c.gpus GPUs (one process
// driving every GPU), reported as NCCL bus bandwidth.
#include <algorithm>
#include <memory>
#include <utility>

#include <cuda_runtime.h>

#include "bench/ops.h"
#include "bench/owned_stream.h"
#include "gpu/collective.h"
#include "gpu/device.h"
#include "gpu/timing.h"

namespace kvshard::bench {

Status BenchAllGather(BenchContext& c, int64_t bytes) {
  // Destroyed in reverse order on every path: streams, then buffers, then the communicators.
  KVSHARD_ASSIGN_OR_RETURN(std::unique_ptr<gpu::RankGroup> group,
                           gpu::CreateNcclGroup(c.gpus, c.opt.collective_timeout_ms));
  const int n = c.gpus;
  std::vector<gpu::DeviceBuffer> bufs;
  std::vector<void*> ptrs;
  std::vector<OwnedStream> streams;
  std::vector<int> devices;
  for (int i = 0; i < n; ++i) {
    devices.push_back(i);
    KVSHARD_ASSIGN_OR_RETURN(OwnedStream stream, OwnedStream::Create(i));  // device i is current from here
    streams.push_back(std::move(stream));
    std::vector<uint8_t> host(n * bytes, 0);
    auto block = PatternRows(bytes / c.opt.row_bytes, c.opt.row_bytes, 100 + i);
    std::copy(block.begin(), block.end(), host.begin() + i * bytes);
    KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer b, gpu::Upload(host));
    ptrs.push_back(b.data());
    bufs.push_back(std::move(b));
  }
  const std::vector<cudaStream_t> raw = RawStreams(streams);
  // One checked round first: a stalled peer fails here within the timeout instead of hanging the timed loop.
  KVSHARD_RETURN_IF_ERROR(group->AllGatherInPlace(ptrs, bytes, raw));
  KVSHARD_RETURN_IF_ERROR(group->Synchronize(raw));
  KVSHARD_ASSIGN_OR_RETURN(double us, gpu::TimeMeanUs([&] { return group->AllGatherInPlace(ptrs, bytes, raw); },
                                                      devices, c.opt.warmup, c.opt.iters));
  std::vector<uint8_t> want(n * bytes, 0);
  for (int r = 0; r < n; ++r) {
    auto block = PatternRows(bytes / c.opt.row_bytes, c.opt.row_bytes, 100 + r);
    std::copy(block.begin(), block.end(), want.begin() + r * bytes);
  }
  int64_t wrong = 0;
  for (int i = 0; i < n; ++i) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(i));
    KVSHARD_ASSIGN_OR_RETURN(auto got, gpu::Download<uint8_t>(ptrs[i], n * bytes));
    wrong += CountWrongRows(got, want, c.opt.row_bytes);
  }
  const double total = static_cast<double>(n) * bytes;
  BenchRow r = MakeRow("allgather_nccl", bytes, us, total * (n - 1) / n, "allgather", 0, wrong);
  r.algbw_gbs = total / us / 1e3;
  r.pct_limit = 100;
  r.note = std::to_string(n) + " GPUs, in place, raw ncclAllGather";
  c.allgather_busbw[bytes] = r.busbw_gbs;
  c.rows->push_back(r);
  return Status::Ok();
}

}  // namespace kvshard::bench
