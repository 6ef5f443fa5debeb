// LayerAheadGather's per-local-rank state (streams, events, pools, scratch slots, the batch's plan buffers): private
// to the prefix_gather package, shared by prefix_gather.cc (set-up, batches, reads) and prefix_gather_layers.cc
// (packs, all-gathers, writes).
#ifndef KVSHARD_GPU_PREFIX_GATHER_RANK_H_
#define KVSHARD_GPU_PREFIX_GATHER_RANK_H_

#include <cuda_runtime.h>

#include <vector>

#include "gpu/device.h"
#include "gpu/prefix_gather.h"

namespace kvshard::gpu {

struct LayerAheadGather::Rank {
  int device = 0;
  int rank = 0;
  cudaStream_t compute = nullptr;
  cudaStream_t gather = nullptr;
  cudaStream_t pack = nullptr;  // send-row packing, so packing layer l+1 overlaps the all-gather of layer l
  bool owns_streams = true;     // false: rank 0's one stream (one_stream), destroyed there
  cudaEvent_t packed[2] = {nullptr, nullptr};  // per slot: its send block is packed
  cudaEvent_t ready[2] = {nullptr, nullptr};
  cudaEvent_t compute_done = nullptr;
  std::vector<DeviceBuffer> pools;     // [buffer]: layers x pool_rows x row_bytes_b
  std::vector<DeviceBuffer> slots[2];  // [slot][buffer]: scratch_rows x row_bytes_b
  DeviceBuffer staging[2];             // several buffers: the packed all-gather region of each slot
  DeviceBuffer page_pos;
  DeviceBuffer send_rows;
  DeviceBuffer chunk_locs;
  // Where the batch's plan is on the device: this rank's buffers above, or, on one stream (one_stream_), every
  // rank's views into the one upload of the group (page_pos and chunk_locs shared, send rows per rank).
  int32_t* page_pos_at = nullptr;
  int64_t* send_rows_at = nullptr;
  int64_t* chunk_locs_at = nullptr;
  DeviceBuffer bad;                // int64 counter (one stream: rank 0's counts every rank's rows)
  int64_t* bad_at = nullptr;       // the counter this rank's kernels add to
  PinnedBuffer bad_host;           // BadRows' copy of it
  cudaEvent_t uploaded = nullptr;  // after this rank's copies out of plan_upload_
  bool uploading = false;          // `uploaded` was recorded since the last wait for it
  // The batch's write plan (SGLang's _get_write_plan), built once per epoch on the device.
  DeviceBuffer owned_idx, local_rows, owned_count, plan_temp;
  ~Rank() {
    cudaSetDevice(device);
    for (cudaEvent_t e : ready) {
      if (e) cudaEventDestroy(e);
    }
    if (compute_done) cudaEventDestroy(compute_done);
    if (uploaded) cudaEventDestroy(uploaded);
    for (cudaEvent_t e : packed) {
      if (e) cudaEventDestroy(e);
    }
    if (!owns_streams) return;
    if (pack && pack != compute) cudaStreamDestroy(pack);
    if (gather && gather != compute) cudaStreamDestroy(gather);
    if (compute) cudaStreamDestroy(compute);
  }
};

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_PREFIX_GATHER_RANK_H_
