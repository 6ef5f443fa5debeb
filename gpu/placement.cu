// Placement kernels: a grid-stride map and a CUB order-preserving select over a transform iterator.
#include <cuda_runtime.h>

#include <cub/device/device_select.cuh>
#include <thrust/iterator/transform_iterator.h>

#include "gpu/device.h"
#include "gpu/nvtx.h"
#include "gpu/placement.h"

namespace kvshard::gpu {
namespace {

struct LocalIfOwned {
  int64_t lps, ps, rank;
  __host__ __device__ int64_t operator()(int64_t loc) const {
    return (loc % lps) / ps == rank ? (loc / lps) * ps + loc % ps : -1;
  }
};

struct NonNegative {
  __host__ __device__ bool operator()(int64_t x) const { return x >= 0; }
};

__global__ void PlacementMapKernel(const int64_t* __restrict__ locs, int64_t n, int64_t lps, int64_t ps, int64_t rank,
                                   int64_t* __restrict__ owner, int64_t* __restrict__ local_index,
                                   uint8_t* __restrict__ mask) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t loc = locs[i];
    int64_t o = (loc % lps) / ps;
    owner[i] = o;
    local_index[i] = (loc / lps) * ps + loc % ps;
    mask[i] = o == rank;
  }
}

int GridFor(int64_t n, int threads) {
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

}  // namespace

Status PlacementCanImplement(const PlacementSpec& spec, int64_t rank, int64_t n) {
  KVSHARD_RETURN_IF_ERROR(ValidatePlacementSpec(spec));
  KVSHARD_RETURN_IF_ERROR(ValidateRank(rank, spec.shard_size));
  if (n < 0 || n > (int64_t{1} << 40)) return InvalidArgument("n: must be in [0, 2^40], got ", n);
  return Status::Ok();
}

Status LaunchPlacementMap(const int64_t* locs, int64_t n, const PlacementSpec& spec, int64_t rank, int64_t* owner,
                          int64_t* local_index, uint8_t* mask, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.placement.map");
  KVSHARD_RETURN_IF_ERROR(PlacementCanImplement(spec, rank, n));
  if (n == 0) return Status::Ok();
  PlacementMapKernel<<<GridFor(n, 256), 256, 0, stream>>>(locs, n, spec.logical_page_size(), spec.page_size, rank,
                                                          owner, local_index, mask);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

StatusOr<size_t> FilterLocalTempBytes(int64_t n) {
  size_t bytes = 0;
  auto in = thrust::make_transform_iterator(static_cast<const int64_t*>(nullptr), LocalIfOwned{1, 1, 0});
  KVSHARD_CUDA_CHECK(cub::DeviceSelect::If(nullptr, bytes, in, static_cast<int64_t*>(nullptr),
                                           static_cast<int64_t*>(nullptr), n, NonNegative{}));
  return bytes;
}

Status LaunchFilterLocal(const int64_t* locs, int64_t n, const PlacementSpec& spec, int64_t rank, int64_t* out,
                         int64_t* count, void* temp, size_t temp_bytes, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.placement.filter_local");
  KVSHARD_RETURN_IF_ERROR(PlacementCanImplement(spec, rank, n));
  auto in = thrust::make_transform_iterator(locs, LocalIfOwned{spec.logical_page_size(), spec.page_size, rank});
  KVSHARD_CUDA_CHECK(cub::DeviceSelect::If(temp, temp_bytes, in, out, count, n, NonNegative{}, stream));
  return Status::Ok();
}

StatusOr<PlacementResult> RunPlacement(const PlacementSpec& spec, int64_t rank, const std::vector<int64_t>& locs) {
  KVSHARD_NVTX_RANGE("kvshard.placement.run");
  KVSHARD_RETURN_IF_ERROR(ValidateLocs(locs));
  const int64_t n = static_cast<int64_t>(locs.size());
  KVSHARD_RETURN_IF_ERROR(PlacementCanImplement(spec, rank, n));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_locs, Upload(locs));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_owner, DeviceBuffer::Allocate(n * sizeof(int64_t)));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_local, DeviceBuffer::Allocate(n * sizeof(int64_t)));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_mask, DeviceBuffer::Allocate(n));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_filtered, DeviceBuffer::Allocate(n * sizeof(int64_t)));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_count, DeviceBuffer::Allocate(sizeof(int64_t)));
  KVSHARD_ASSIGN_OR_RETURN(size_t temp_bytes, FilterLocalTempBytes(n));
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer d_temp, DeviceBuffer::Allocate(temp_bytes));
  cudaStream_t stream = nullptr;
  KVSHARD_RETURN_IF_ERROR(LaunchPlacementMap(d_locs.as<int64_t>(), n, spec, rank, d_owner.as<int64_t>(),
                                             d_local.as<int64_t>(), d_mask.as<uint8_t>(), stream));
  if (n > 0) {
    KVSHARD_RETURN_IF_ERROR(LaunchFilterLocal(d_locs.as<int64_t>(), n, spec, rank, d_filtered.as<int64_t>(),
                                              d_count.as<int64_t>(), d_temp.data(), temp_bytes, stream));
  }
  KVSHARD_RETURN_IF_ERROR(SyncStream(stream));
  PlacementResult r;
  KVSHARD_ASSIGN_OR_RETURN(r.owner, Download<int64_t>(d_owner.data(), n));
  KVSHARD_ASSIGN_OR_RETURN(r.local_index, Download<int64_t>(d_local.data(), n));
  KVSHARD_ASSIGN_OR_RETURN(std::vector<uint8_t> mask, Download<uint8_t>(d_mask.data(), n));
  r.local_mask.assign(mask.begin(), mask.end());
  int64_t count = 0;
  if (n > 0) {
    KVSHARD_RETURN_IF_ERROR(CopyToHost(&count, d_count.data(), sizeof(count)));
  }
  KVSHARD_ASSIGN_OR_RETURN(r.filter_local, Download<int64_t>(d_filtered.data(), count));
  return r;
}

}  // namespace kvshard::gpu
