// The pool pipeline on CUDA: gpu::DeviceGatherPlanner builds each extend's plan, gpu::LayerAheadGather
// installs it and moves every row; reads are translated and gathered on the device and downloaded.
#include "replay/gpu_pool_path.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/collective.h"
#include "gpu/device.h"
#include "gpu/gather_plan.h"
#include "gpu/kv_ops.h"
#include "gpu/nvtx.h"
#include "gpu/prefix_gather.h"

namespace kvshard::replay {
namespace {

class GpuPoolPath : public PoolDataPath {
 public:
  GpuPoolPath(const PoolGeometry& g, std::unique_ptr<gpu::RankGroup> comm) : g_(g), comm_(std::move(comm)) {}

  Status Init() {
    KVSHARD_NVTX_RANGE("kvshard.pool.init");
    ExtendBatch geometry;
    geometry.shard_size = g_.shard_size;
    geometry.page_size = g_.page_size;
    geometry.pages_per_rank = g_.pages_per_rank;
    geometry.max_prefix_tokens = g_.max_prefix_tokens;
    geometry.chunk_tokens = g_.chunk_tokens;
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
    KVSHARD_ASSIGN_OR_RETURN(planner_, gpu::DeviceGatherPlanner::Create(geometry));
    gpu::PrefixGatherShape shape;
    shape.layers = g_.num_layers;
    shape.page_size = g_.page_size;
    shape.pool_rows = (g_.pages_per_rank + 1) * g_.page_size;
    shape.max_prefix_tokens = g_.max_prefix_tokens;
    shape.chunk_tokens = g_.chunk_tokens;
    shape.row_bytes = g_.buffers[0].row_bytes;
    if (g_.buffers.size() > 1) {
      for (const ref::PoolBuffer& b : g_.buffers) shape.buffer_row_bytes.push_back(b.row_bytes);
    }
    shape.n_page_pos = planner_->page_pos_size();
    KVSHARD_RETURN_IF_ERROR(gpu::PrefixGatherCanImplement(shape, comm_->size()));
    KVSHARD_ASSIGN_OR_RETURN(gather_, gpu::LayerAheadGather::Create(comm_.get(), shape));
    return Status::Ok();
  }

  std::string Name() const override {
    return comm_->Kind() == "emulated"
               ? StrCat("gpu (", comm_->size(), " ranks emulated on device ", comm_->device(0), ")")
               : StrCat("gpu (", comm_->Kind(), ", ", comm_->size(), " devices)");
  }

  StatusOr<GatherPlan> Begin(const ExtendBatch& batch, const std::vector<int64_t>& out_cache_loc) override {
    KVSHARD_NVTX_RANGE("kvshard.pool.begin_extend");
    KVSHARD_RETURN_IF_ERROR(gpu::GatherPlanCanImplement(batch));
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
    KVSHARD_RETURN_IF_ERROR(planner_->Upload(batch, nullptr));
    KVSHARD_RETURN_IF_ERROR(planner_->Launch(0, nullptr));
    KVSHARD_ASSIGN_OR_RETURN(GatherPlan plan, planner_->Download(nullptr));
    // Every rank installs the device plan (page_pos mirrored, its own send rows).
    KVSHARD_ASSIGN_OR_RETURN(std::vector<int32_t> page_pos,
                             gpu::Download<int32_t>(planner_->page_pos(), planner_->page_pos_size()));
    std::vector<std::vector<int64_t>> send;
    for (int rank : comm_->local_ranks()) send.push_back(plan.ranks[rank].send_rows);
    KVSHARD_RETURN_IF_ERROR(gather_->BeginExtend(plan.block_pages, page_pos, send, out_cache_loc));
    out_cache_loc_ = out_cache_loc;
    active_ = true;
    return plan;
  }

  Status Write(int64_t layer, const std::vector<int64_t>& locs, const ref::BufferRows& rows) override {
    KVSHARD_NVTX_RANGE("kvshard.pool.write_layer");
    const int64_t n = static_cast<int64_t>(locs.size());
    if (active_ && locs != out_cache_loc_) {
      return InvalidArgument(
          "locs: during an extend the GPU backend writes the batch's out_cache_loc only "
          "(leave locs out, or give exactly those slots)");
    }
    const int ranks = static_cast<int>(comm_->local_ranks().size());
    std::vector<gpu::DeviceBuffer> bufs;
    std::vector<std::vector<const void*>> ptrs(ranks);
    for (int i = 0; i < ranks; ++i) {
      KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(i)));
      for (const std::vector<uint8_t>& b : rows) {
        KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d, gpu::Upload(b));
        ptrs[i].push_back(d.data());
        bufs.push_back(std::move(d));
      }
    }
    if (active_) {
      KVSHARD_RETURN_IF_ERROR(gather_->WriteLayerBuffers(layer, ptrs));
    } else {  // outside an extend (decode writes): the owner filter only, straight into each rank's pools
      const PlacementSpec spec{g_.shard_size, g_.page_size};
      for (int i = 0; i < ranks; ++i) {
        KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(i)));
        KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_locs, gpu::Upload(locs));
        for (size_t b = 0; b < g_.buffers.size(); ++b) {
          KVSHARD_RETURN_IF_ERROR(
              gpu::LaunchOwnerFilteredWrite(gather_->pool(i, layer, static_cast<int>(b)), gather_->shape().pool_rows,
                                            ptrs[i][b], d_locs.as<int64_t>(), n, spec, comm_->local_ranks()[i],
                                            g_.buffers[b].row_bytes, nullptr, gather_->compute_stream(i)));
        }
        KVSHARD_RETURN_IF_ERROR(gpu::SyncStream(gather_->compute_stream(i)));
      }
    }
    // The uploads must outlive the kernels reading them; the compute stream waits on the gather, so the wait has
    // the group's deadline.
    for (int i = 0; i < ranks; ++i) KVSHARD_RETURN_IF_ERROR(comm_->SynchronizeRank(i, gather_->compute_stream(i)));
    return Status::Ok();
  }

  StatusOr<std::vector<ref::BufferRows>> Read(int64_t layer, const std::vector<int64_t>& locs) override {
    KVSHARD_NVTX_RANGE("kvshard.pool.read_layer");
    KVSHARD_ASSIGN_OR_RETURN(auto slots, gather_->AcquireBuffersForRead(layer));
    const int64_t m = static_cast<int64_t>(locs.size());
    std::vector<ref::BufferRows> out;
    for (int i = 0; i < static_cast<int>(comm_->local_ranks().size()); ++i) {
      KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(i)));
      const cudaStream_t s = gather_->compute_stream(i);
      KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_locs, gpu::Upload(locs));
      KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_rows, gpu::DeviceBuffer::Allocate(m * 8));
      KVSHARD_RETURN_IF_ERROR(gpu::LaunchTranslate(d_rows.as<int64_t>(), d_locs.as<int64_t>(), m, gather_->page_pos(i),
                                                   gather_->shape().n_page_pos, g_.page_size, s));
      out.emplace_back();
      for (size_t b = 0; b < g_.buffers.size(); ++b) {
        const int64_t row_bytes = g_.buffers[b].row_bytes;
        KVSHARD_ASSIGN_OR_RETURN(gpu::DeviceBuffer d_out, gpu::DeviceBuffer::Allocate(m * row_bytes));
        KVSHARD_RETURN_IF_ERROR(gpu::LaunchGatherRows(d_out.data(), slots[i][b], gather_->shape().scratch_rows(),
                                                      d_rows.as<int64_t>(), m, row_bytes, nullptr, s));
        KVSHARD_RETURN_IF_ERROR(comm_->SynchronizeRank(i, s));  // s waits on the gathered layer: the group's deadline
        KVSHARD_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, gpu::Download<uint8_t>(d_out.data(), m * row_bytes));
        out.back().push_back(std::move(bytes));
      }
    }
    return out;
  }

  Status End() override {
    KVSHARD_NVTX_RANGE("kvshard.pool.end_extend");
    KVSHARD_RETURN_IF_ERROR(gather_->EndExtend());
    active_ = false;
    KVSHARD_ASSIGN_OR_RETURN(int64_t bad, gather_->BadRows());
    if (bad != 0) return Mismatch("invariant: ", bad, " rows skipped on the GPU for out-of-range indices");
    return Status::Ok();
  }

 private:
  PoolGeometry g_;
  std::unique_ptr<gpu::RankGroup> comm_;
  std::unique_ptr<gpu::DeviceGatherPlanner> planner_;
  std::unique_ptr<gpu::LayerAheadGather> gather_;
  std::vector<int64_t> out_cache_loc_;
  bool active_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<PoolDataPath>> CreateGpuPoolPath(const PoolGeometry& geometry, int gpus) {
  std::string why;
  const int visible = gpu::VisibleDeviceCount(&why);
  if (visible == 0) return Unavailable("--backend: no CUDA device visible (", why, ")");
  std::unique_ptr<gpu::RankGroup> comm;
  if (gpus <= 1) {
    KVSHARD_ASSIGN_OR_RETURN(comm, gpu::CreateEmulatedGroup(static_cast<int>(geometry.shard_size), 0));
  } else {
    if (gpus != geometry.shard_size) {
      return InvalidArgument("--gpus: must be 1 (emulated ranks) or the trace's shard_size ", geometry.shard_size,
                             ", got ", gpus);
    }
    if (visible < gpus) return Unavailable("--gpus: ", gpus, " devices needed, ", visible, " visible");
    KVSHARD_ASSIGN_OR_RETURN(comm, gpu::CreateNcclGroup(gpus));
  }
  auto path = std::make_unique<GpuPoolPath>(geometry, std::move(comm));
  KVSHARD_RETURN_IF_ERROR(path->Init());
  return std::unique_ptr<PoolDataPath>(std::move(path));
}

}  // namespace kvshard::replay
