// LayerAheadGather's per-layer data movement: packing a layer's send blocks (pack stream), its in-place
// all-gather and split per buffer (gather stream; ranks emulated on one stream pack into every rank's slot at once),
// and writing a layer's chunk into the scratch slot and the owners' pools (compute stream). Ranks emulated on one
// device take one launch a buffer for all of them (kv_rank_ops.cu), and may have the chunk's rows made where they are
// written (WriteLayerMade: replay's payload rows); on one stream with one buffer a batch's start (write plans and the
// first two layers' packs) is one launch (StartOnOneStream).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gpu/kv_ops.h"
#include "gpu/nvtx.h"
#include "gpu/prefix_gather.h"
#include "gpu/prefix_gather_rank.h"

namespace kvshard::gpu {

Status LayerAheadGather::Pack(int64_t layer) {
  KVSHARD_NVTX_RANGE("kvshard.gather.pack");
  if (layer >= shape_.layers) return Status::Ok();
  const int which = static_cast<int>(layer % 2);
  if (resident_[which] == std::make_pair(layer, epoch_)) return Status::Ok();
  if (prepacked_ == std::make_pair(layer, epoch_)) {  // packed and gathered with the batch's start
    KVSHARD_RETURN_IF_ERROR(CheckNotAborted());
    resident_[which] = prepacked_;
    return Status::Ok();
  }
  const int64_t block_rows = block_pages_ * shape_.page_size;
  const std::vector<int64_t> widths = shape_.buffers();
  int64_t row_sum = 0;
  for (int64_t w : widths) row_sum += w;
  // Rank r's send block. One buffer: it sits in place in the scratch tensor. Several: the rank's packed block of
  // the staging region holds [buffer 0's block rows | buffer 1's | ...].
  const auto send_block = [&](Rank& r) {
    return widths.size() == 1 ? static_cast<char*>(r.slots[which][0].data()) + r.rank * block_rows * widths[0]
                              : static_cast<char*>(r.staging[which].data()) + r.rank * block_rows * row_sum;
  };
  if (one_stream_ && state_.size() > 1 && state_.size() <= static_cast<size_t>(kMaxRankJobs)) {
    // Ranks emulated on one stream: every rank's send block packed straight into every rank's slot, one launch a
    // buffer, which is the pack and the emulated in-place all-gather after it (nothing between them on the stream
    // touches the gathered region). Nothing is left for IssueGathers; the group is still asked whether it is usable.
    KVSHARD_RETURN_IF_ERROR(CheckNotAborted());
    Rank& first = *state_[0];
    KVSHARD_CUDA_CHECK(cudaSetDevice(first.device));
    TraceBegin(StrCat("pack + all-gather L", layer), first.compute);
    for (size_t b = 0; b < widths.size(); ++b) {
      std::vector<PackSource> sources;
      std::vector<void*> outs;
      for (size_t i = 0; i < state_.size(); ++i) {
        Rank& r = *state_[i];
        sources.push_back(
            {pool(static_cast<int>(i), layer, static_cast<int>(b)), shape_.pool_rows, r.send_rows_at, r.bad_at});
        outs.push_back(r.slots[which][b].data());
      }
      KVSHARD_RETURN_IF_ERROR(LaunchPackAllGatherRanks(sources, outs, block_rows, widths[b], first.compute));
    }
    TraceEnd(first.compute);
    resident_[which] = {layer, epoch_};
    return Status::Ok();
  }
  if (shared_device_ && state_.size() > 1 && state_.size() <= static_cast<size_t>(kMaxRankJobs)) {
    // Ranks emulated on one device: rank 0's pack stream waits for every rank's compute work so far (as each
    // rank's own pack stream would), packs every rank's send block with one launch a buffer, and every rank's
    // packed event is recorded after it. Later uploads into a rank's send rows stay ordered after the pack: its
    // gather stream waits for the packed event and BeginExtend's uploads for the gather stream.
    Rank& first = *state_[0];
    KVSHARD_CUDA_CHECK(cudaSetDevice(first.device));
    for (auto& rp : state_) {
      if (rp->compute == first.pack) continue;
      KVSHARD_CUDA_CHECK(cudaEventRecord(rp->compute_done, rp->compute));
      KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(first.pack, rp->compute_done, 0));
    }
    TraceBegin(StrCat("pack L", layer), first.pack);
    int64_t offset = 0;
    for (size_t b = 0; b < widths.size(); ++b) {
      std::vector<GatherRowsJob> jobs;
      for (size_t i = 0; i < state_.size(); ++i) {
        Rank& r = *state_[i];
        jobs.push_back({send_block(r) + offset, pool(static_cast<int>(i), layer, static_cast<int>(b)), shape_.pool_rows,
                        r.send_rows_at, r.bad_at});
      }
      KVSHARD_RETURN_IF_ERROR(LaunchGatherRowsRanks(jobs, block_rows, widths[b], first.pack));
      offset += block_rows * widths[b];
    }
    TraceEnd(first.pack);
    for (auto& rp : state_) {
      if (rp->gather != first.pack) KVSHARD_CUDA_CHECK(cudaEventRecord(rp->packed[which], first.pack));
    }
  } else {
    for (size_t i = 0; i < state_.size(); ++i) {
      Rank& r = *state_[i];
      KVSHARD_CUDA_CHECK(cudaSetDevice(r.device));
      // Order after all compute work enqueued so far: the slot's previous readers (layer - 2, which waited for
      // that layer's all-gather) and the pool writes.
      if (r.pack != r.compute) {
        KVSHARD_CUDA_CHECK(cudaEventRecord(r.compute_done, r.compute));
        KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(r.pack, r.compute_done, 0));
      }
      if (i == 0) TraceBegin(StrCat("pack L", layer), r.pack);
      char* block = send_block(r);
      for (size_t b = 0; b < widths.size(); ++b) {
        KVSHARD_RETURN_IF_ERROR(LaunchGatherRows(block, pool(static_cast<int>(i), layer, static_cast<int>(b)),
                                                 shape_.pool_rows, r.send_rows_at, block_rows, widths[b], r.bad_at,
                                                 r.pack));
        block += block_rows * widths[b];
      }
      if (i == 0) TraceEnd(r.pack);
      if (r.gather != r.pack) KVSHARD_CUDA_CHECK(cudaEventRecord(r.packed[which], r.pack));
    }
  }
  resident_[which] = {layer, epoch_};
  pending_.push_back(layer);
  return Status::Ok();
}

Status LayerAheadGather::StartOnOneStream(int64_t block_pages, int64_t n) {
  KVSHARD_NVTX_RANGE("kvshard.gather.start_on_one_stream");
  Rank& first = *state_[0];
  KVSHARD_CUDA_CHECK(cudaSetDevice(first.device));
  n_chunk_locs_ = n;
  ++epoch_;
  block_pages_ = block_pages;
  active_ = true;
  // Layer 1's send rows are prefix rows, which no chunk write of this batch touches (chunk pages are fresh), and its
  // slot's last readers came earlier on this stream: packed now, it holds what packing it at layer 0's read would
  // put there. It becomes resident only then (Pack), so a read's scratch-miss errors are unchanged.
  const int64_t layers = block_pages_ > 0 ? std::min<int64_t>(kMaxBatchStartPacks, shape_.layers) : 0;
  if (layers > 0) KVSHARD_RETURN_IF_ERROR(CheckNotAborted());
  std::vector<PackAllGatherJob> packs(layers);
  for (int64_t layer = 0; layer < layers; ++layer) {
    for (size_t i = 0; i < state_.size(); ++i) {
      Rank& r = *state_[i];
      packs[layer].sources.push_back({pool(static_cast<int>(i), layer), shape_.pool_rows, r.send_rows_at, r.bad_at});
      packs[layer].outs.push_back(r.slots[layer % 2][0].data());
    }
  }
  TraceBegin(layers > 1 ? "write plans, pack + all-gather L0 and L1" : "write plans, pack + all-gather L0",
             first.compute);
  KVSHARD_RETURN_IF_ERROR(LaunchBatchStartRanks(first.chunk_locs_at, n, {comm_->size(), shape_.page_size},
                                                WritePlanOuts(), packs, block_pages_ * shape_.page_size,
                                                shape_.buffers()[0], first.compute));
  TraceEnd(first.compute);
  if (layers > 0) resident_[0] = {0, epoch_};
  prepacked_ = layers > 1 ? std::make_pair(int64_t{1}, epoch_) : std::make_pair(int64_t{-1}, int64_t{-1});
  return Status::Ok();
}

Status LayerAheadGather::IssueGathers(int64_t upto) {
  KVSHARD_NVTX_RANGE("kvshard.gather.issue");
  const std::vector<int64_t> widths = shape_.buffers();
  int64_t row_sum = 0;
  for (int64_t w : widths) row_sum += w;
  const int64_t block_rows = block_pages_ * shape_.page_size;
  while (!pending_.empty() && pending_.front() <= upto) {
    const int which = static_cast<int>(pending_.front() % 2);
    std::vector<void*> bufs;
    std::vector<cudaStream_t> streams;
    for (auto& rp : state_) {
      KVSHARD_CUDA_CHECK(cudaSetDevice(rp->device));
      if (!one_stream_) KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(rp->gather, rp->packed[which], 0));
      bufs.push_back(widths.size() == 1 ? rp->slots[which][0].data() : rp->staging[which].data());
      streams.push_back(rp->gather);
    }
    // In place: each rank's send block already sits at its rank's offset of the region.
    TraceBegin(StrCat("all-gather L", pending_.front()), state_[0]->gather);
    KVSHARD_RETURN_IF_ERROR(comm_->AllGatherInPlace(bufs, block_rows * row_sum, streams));
    TraceEnd(state_[0]->gather);
    for (auto& rp : state_) {
      KVSHARD_CUDA_CHECK(cudaSetDevice(rp->device));
      if (widths.size() > 1) {  // split: rank q's rows of buffer b -> scratch_b[q * block_rows ...]
        int64_t offset = 0;
        for (size_t b = 0; b < widths.size(); ++b) {
          const size_t width = block_rows * widths[b];
          KVSHARD_CUDA_CHECK(cudaMemcpy2DAsync(
              rp->slots[which][b].data(), width, static_cast<char*>(rp->staging[which].data()) + offset,
              block_rows * row_sum, width, comm_->size(), cudaMemcpyDeviceToDevice, rp->gather));
          offset += width;
        }
      }
      if (!one_stream_) KVSHARD_CUDA_CHECK(cudaEventRecord(rp->ready[which], rp->gather));
    }
    pending_.erase(pending_.begin());
  }
  return Status::Ok();
}

Status LayerAheadGather::WriteLayer(int64_t layer, const std::vector<const void*>& rows) {
  if (shape_.buffers().size() != 1) return InvalidArgument("rows: this pool has several buffers (WriteLayerBuffers)");
  std::vector<std::vector<const void*>> per_buffer;
  for (const void* p : rows) per_buffer.push_back({p});
  return WriteLayerBuffers(layer, per_buffer);
}

Status LayerAheadGather::WriteLayerBuffers(int64_t layer, const std::vector<std::vector<const void*>>& rows) {
  KVSHARD_NVTX_RANGE("kvshard.gather.write_layer");
  if (!active_) return FailedPrecondition("sharded pool write outside an active sharded extend batch");
  if (layer < 0 || layer >= shape_.layers)
    return InvalidArgument("layer: must be in [0, ", shape_.layers, "), got ", layer);
  if (rows.size() != state_.size()) return InvalidArgument("rows: expected one buffer per local rank");
  const std::vector<int64_t> widths = shape_.buffers();
  for (size_t i = 0; i < state_.size(); ++i) {
    if (rows[i].size() != widths.size()) return InvalidArgument("rows[", i, "]: expected ", widths.size(), " buffers");
  }
  if (shared_device_ && state_.size() > 1 && state_.size() <= static_cast<size_t>(kMaxRankJobs)) {
    return WriteChunkAllRanks(layer, &rows, 0, 0);
  }
  for (size_t i = 0; i < state_.size(); ++i) {
    Rank& r = *state_[i];
    KVSHARD_CUDA_CHECK(cudaSetDevice(r.device));
    for (size_t b = 0; b < widths.size(); ++b) {
      KVSHARD_RETURN_IF_ERROR(LaunchStageChunk(r.slots[layer % 2][b].data(), shape_.scratch_rows(), rows[i][b],
                                               r.chunk_locs_at, n_chunk_locs_, r.page_pos_at, shape_.n_page_pos,
                                               shape_.page_size, widths[b], r.bad_at, r.compute));
      KVSHARD_RETURN_IF_ERROR(LaunchScatterRows(pool(static_cast<int>(i), layer, static_cast<int>(b)), shape_.pool_rows,
                                                rows[i][b], n_chunk_locs_, r.owned_idx.as<int64_t>(),
                                                r.local_rows.as<int64_t>(), r.owned_count.as<int64_t>(), n_chunk_locs_,
                                                widths[b], r.bad_at, r.compute));
    }
  }
  return Status::Ok();
}

bool LayerAheadGather::CanWriteMade() const {
  return shared_device_ && state_.size() <= static_cast<size_t>(kMaxRankJobs);
}

Status LayerAheadGather::WriteLayerMade(int64_t layer, uint64_t seed, int64_t generation, uint32_t* mark,
                                        int64_t mark_slots) {
  KVSHARD_NVTX_RANGE("kvshard.gather.write_layer_made");
  if (!active_) return FailedPrecondition("sharded pool write outside an active sharded extend batch");
  if (layer < 0 || layer >= shape_.layers)
    return InvalidArgument("layer: must be in [0, ", shape_.layers, "), got ", layer);
  if (!CanWriteMade()) return FailedPrecondition("WriteLayerMade: every local rank must be on one device");
  return WriteChunkAllRanks(layer, nullptr, seed, generation, mark, mark_slots);
}

Status LayerAheadGather::WriteChunkAllRanks(int64_t layer, const std::vector<std::vector<const void*>>* rows,
                                            uint64_t seed, int64_t generation, uint32_t* mark, int64_t mark_slots) {
  // Ranks emulated on one device: rank 0's compute stream waits for every rank's, stages and scatters every
  // rank's rows with one launch a buffer, and every rank's compute stream waits for it.
  const std::vector<int64_t> widths = shape_.buffers();
  Rank& first = *state_[0];
  KVSHARD_CUDA_CHECK(cudaSetDevice(first.device));
  KVSHARD_RETURN_IF_ERROR(JoinComputeStreams());
  ChunkPayload made{seed, layer, generation, 0, mark, mark_slots};
  for (size_t b = 0; b < widths.size(); ++b) {
    std::vector<WriteChunkJob> jobs;
    for (size_t i = 0; i < state_.size(); ++i) {
      Rank& r = *state_[i];
      jobs.push_back({rows == nullptr ? nullptr : (*rows)[i][b], r.slots[layer % 2][b].data(), shape_.scratch_rows(),
                      r.chunk_locs_at, r.page_pos_at, shape_.n_page_pos,
                      pool(static_cast<int>(i), layer, static_cast<int>(b)), shape_.pool_rows,
                      r.owned_idx.as<int64_t>(), r.local_rows.as<int64_t>(), r.owned_count.as<int64_t>(), r.bad_at});
    }
    KVSHARD_RETURN_IF_ERROR(LaunchWriteChunkRanks(jobs, n_chunk_locs_, shape_.page_size, widths[b], first.compute,
                                                  rows == nullptr ? &made : nullptr));
    made.offset += widths[b];
    made.mark = nullptr;  // the first buffer's launch marked the slots
  }
  return ForkComputeStreams();
}

}  // namespace kvshard::gpu
