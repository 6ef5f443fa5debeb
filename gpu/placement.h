// GPU placement bijection: owner/local-index map and order-preserving filter_local (spec §1).
// Host-safe: kernels live in placement.cu; these are their launchers.
#ifndef KVSHARD_GPU_PLACEMENT_H_
#define KVSHARD_GPU_PLACEMENT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/placement.h"
#include "core/spec.h"
#include "core/status.h"
#include "gpu/stream.h"

namespace kvshard::gpu {

// Validates the arguments of the placement launches (no device work).
Status PlacementCanImplement(const PlacementSpec& spec, int64_t rank, int64_t n);

// PlacementMapKernel: owner[i], local_index[i] and mask[i] (owner == rank) for n device locs.
Status LaunchPlacementMap(const int64_t* locs, int64_t n, const PlacementSpec& spec, int64_t rank, int64_t* owner,
                          int64_t* local_index, uint8_t* mask, cudaStream_t stream);

// Temporary storage bytes LaunchFilterLocal needs for n locs.
StatusOr<size_t> FilterLocalTempBytes(int64_t n);
// Order-preserving compaction (CUB DeviceSelect): out[0..*count) = local_index of owned locs.
Status LaunchFilterLocal(const int64_t* locs, int64_t n, const PlacementSpec& spec, int64_t rank, int64_t* out,
                         int64_t* count, void* temp, size_t temp_bytes, cudaStream_t stream);

// Uploads locs, runs both launches on the current device, downloads the result (core's type, as ref::PlaceLocs).
StatusOr<PlacementResult> RunPlacement(const PlacementSpec& spec, int64_t rank, const std::vector<int64_t>& locs);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_PLACEMENT_H_
