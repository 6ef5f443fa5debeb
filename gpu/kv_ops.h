// GPU row movers of the sharded KV pool (spec §3): index_select gather (send-row packing), owner-filtered
// pool writes, chunk staging into a scratch slot through page_pos, and translate. Host-safe launch API.
// Every launch takes an optional device counter `bad` that counts rows skipped for an out-of-range index
// (a kernel never writes outside its buffers); nullptr disables counting.
#ifndef KVSHARD_GPU_KV_OPS_H_
#define KVSHARD_GPU_KV_OPS_H_

#include <cstdint>
#include <vector>

#include "core/spec.h"
#include "core/status.h"
#include "gpu/stream.h"

namespace kvshard::gpu {

// Checks sizes shared by the row launches (n >= 0, 0 < row_bytes <= 1 MiB, row counts non-negative).
Status RowOpCanImplement(int64_t n, int64_t row_bytes, int64_t in_rows, int64_t out_rows);

// How a launch starts relative to the kernel before it on its stream: after it completes (kNone), or resident
// early and waiting inside the kernel for it to complete (kProgrammatic: programmatic dependent launch, on
// compute capability 9.0 and later; elsewhere the same as kNone). The result is the same either way.
enum class LaunchOverlap { kNone, kProgrammatic };

// GatherRowsKernel: out[i] = in[index[i]] for i < n (torch.index_select on dim 0).
Status LaunchGatherRows(void* out, const void* in, int64_t in_rows, const int64_t* index, int64_t n, int64_t row_bytes,
                        int64_t* bad, cudaStream_t stream, LaunchOverlap overlap = LaunchOverlap::kNone);

// OwnerWriteKernel: pool[local_index(locs[i])] = rows[i] for every loc that `rank` owns (SGLang's write plan,
// fused: the owner mask is recomputed per row instead of compacted).
Status LaunchOwnerFilteredWrite(void* pool, int64_t pool_rows, const void* rows, const int64_t* locs, int64_t n,
                                const PlacementSpec& spec, int64_t rank, int64_t row_bytes, int64_t* bad,
                                cudaStream_t stream);

// StageChunkKernel: scratch[page_pos[loc/ps]*ps + loc%ps] = rows[i] (the full chunk, every rank).
Status LaunchStageChunk(void* scratch, int64_t scratch_rows, const void* rows, const int64_t* locs, int64_t n,
                        const int32_t* page_pos, int64_t n_page_pos, int64_t page_size, int64_t row_bytes, int64_t* bad,
                        cudaStream_t stream);

// Temporary storage bytes LaunchBuildWritePlan needs for n locs.
StatusOr<size_t> WritePlanTempBytes(int64_t n);
// SGLang's _get_write_plan on the device: owned_idx = positions i (ascending) whose loc `rank` owns,
// local_rows = their local_index; *count (device) = how many. Built once per batch and reused every layer.
Status LaunchBuildWritePlan(const int64_t* locs, int64_t n, const PlacementSpec& spec, int64_t rank, int64_t* owned_idx,
                            int64_t* local_rows, int64_t* count, void* temp, size_t temp_bytes, cudaStream_t stream);
// One rank's write plan: where LaunchBuildWritePlans puts it (device memory, n entries each, and the count).
struct WritePlanOut {
  int64_t rank = 0;
  int64_t* owned_idx = nullptr;
  int64_t* local_rows = nullptr;
  int64_t* count = nullptr;
};
// The largest batch LaunchBuildWritePlans takes (one block per rank scans it; beyond, LaunchBuildWritePlan per rank).
inline constexpr int64_t kMaxWritePlansLocs = int64_t{1} << 16;
// LaunchBuildWritePlan's plan for every rank of `plans` (all on the current device) in one launch, one block per
// rank (ranks emulated on one device: one launch a batch instead of a device-wide selection per rank); n at most
// kMaxWritePlansLocs.
Status LaunchBuildWritePlans(const int64_t* locs, int64_t n, const PlacementSpec& spec,
                             const std::vector<WritePlanOut>& plans, cudaStream_t stream);
// ScatterRowsKernel: dst[dst_idx[j]] = src[src_idx[j]] for j < *count (count read on the device, <= max_count).
Status LaunchScatterRows(void* dst, int64_t dst_rows, const void* src, int64_t src_rows, const int64_t* src_idx,
                         const int64_t* dst_idx, const int64_t* count, int64_t max_count, int64_t row_bytes,
                         int64_t* bad, cudaStream_t stream);

// FillPagePosKernel, then ScatterPagePosKernel: page_pos[p] = trash_page for every p < n_page_pos, then
// page_pos[mapped[2k]] = mapped[2k + 1] for k < n_mapped: a gather plan's dense page_pos made on the device from its
// mapped pages and their scratch pages (core/gather_plan.h), so a large pool's batch uploads its own pages only. A
// mapped page outside [0, n_page_pos) is skipped and counted in `bad`.
Status LaunchSetPagePos(int32_t* page_pos, int64_t n_page_pos, int32_t trash_page, const int32_t* mapped,
                        int64_t n_mapped, int64_t* bad, cudaStream_t stream);

// TranslateKernel: out[i] = page_pos[locs[i]/ps]*ps + locs[i]%ps (translate_loc_to_scratch); -1 if out of range.
Status LaunchTranslate(int64_t* out, const int64_t* locs, int64_t n, const int32_t* page_pos, int64_t n_page_pos,
                       int64_t page_size, cudaStream_t stream);

// One rank's part of LaunchGatherRowsRanks: LaunchGatherRows's out, in, in_rows, index and bad.
struct GatherRowsJob {
  void* out = nullptr;
  const void* in = nullptr;
  int64_t in_rows = 0;
  const int64_t* index = nullptr;
  int64_t* bad = nullptr;
};
// The most jobs one LaunchGatherRowsRanks, LaunchWriteChunkRanks or LaunchTranslateGatherRanks takes.
inline constexpr int kMaxRankJobs = 32;
// LaunchGatherRows for every job of `jobs` (all on the current device, n rows of row_bytes each) in one launch:
// ranks emulated on one device pack a layer's send blocks with one launch instead of one per rank.
Status LaunchGatherRowsRanks(const std::vector<GatherRowsJob>& jobs, int64_t n, int64_t row_bytes, cudaStream_t stream);

// One source rank of LaunchPackAllGatherRanks: its pool (in_rows rows), the send rows it packs (index) and the
// counter of its rows skipped for out-of-range indices (may be null).
struct PackSource {
  const void* in = nullptr;
  int64_t in_rows = 0;
  const int64_t* index = nullptr;
  int64_t* bad = nullptr;
};
// Every source rank's pack (LaunchGatherRowsRanks of n send rows) and the in-place all-gather of the packed blocks
// that follows it, in one launch, for ranks emulated on one device: for every destination q and source r,
// rows r * n + k of outs[q] = sources[r].in row sources[r].index[k]. An index out of range is counted once (in
// sources[r].bad) and its row is left as it is in every destination. At most kMaxRankJobs sources and destinations.
Status LaunchPackAllGatherRanks(const std::vector<PackSource>& sources, const std::vector<void*>& outs, int64_t n,
                                int64_t row_bytes, cudaStream_t stream);

// One layer's pack and emulated all-gather in LaunchBatchStartRanks: LaunchPackAllGatherRanks's sources and outs.
struct PackAllGatherJob {
  std::vector<PackSource> sources;
  std::vector<void*> outs;
};
// The most packs one LaunchBatchStartRanks takes: a batch's first two layers (the two scratch slots).
inline constexpr int kMaxBatchStartPacks = 2;
// A batch's start for ranks emulated on one device, in one launch: LaunchBuildWritePlans(locs, n, spec, plans) and
// LaunchPackAllGatherRanks(packs[k].sources, packs[k].outs, pack_rows, row_bytes) for every k, with the same results
// and bad counts, where the plans and the packs write different memory (the packs read none of it). At most
// kMaxRankJobs plans and kMaxBatchStartPacks packs; n at most kMaxWritePlansLocs. One launch instead of one per part.
Status LaunchBatchStartRanks(const int64_t* locs, int64_t n, const PlacementSpec& spec,
                             const std::vector<WritePlanOut>& plans, const std::vector<PackAllGatherJob>& packs,
                             int64_t pack_rows, int64_t row_bytes, cudaStream_t stream);

// One rank's part of LaunchWriteChunkRanks: LaunchStageChunk's (scratch, page_pos, chunk locs) and LaunchScatterRows's
// (pool, write plan) arguments for the same rows.
struct WriteChunkJob {
  const void* rows = nullptr;
  void* scratch = nullptr;
  int64_t scratch_rows = 0;
  const int64_t* chunk_locs = nullptr;
  const int32_t* page_pos = nullptr;
  int64_t n_page_pos = 0;
  void* pool = nullptr;
  int64_t pool_rows = 0;
  const int64_t* owned_idx = nullptr;
  const int64_t* local_rows = nullptr;
  const int64_t* owned_count = nullptr;
  int64_t* bad = nullptr;
};
// For every job of `jobs` (all on the current device, n chunk rows of row_bytes each), in one launch, what
// LaunchStageChunk(scratch, ..., rows, chunk_locs, n, page_pos, ...) and LaunchScatterRows(pool, ..., rows, n,
// owned_idx, local_rows, owned_count, n, ...) do, with the same bad counts: ranks emulated on one device write a
// layer's chunk with one launch instead of two per rank. The two halves of a job write different memory.
// With `made`, the rows are not read from jobs[j].rows (which may be null) but made where they are written: row i of
// job j is bytes [made->offset, made->offset + row_bytes) of the payload row of (made->layer, jobs[j].chunk_locs[i],
// made->generation) (core/payload.h, the concatenated row of every buffer): replay's writes without a row-making
// launch before each. With made->mark, job 0's staging also sets mark[chunk_locs[i]] = made->generation for every row
// (replay's table of each slot's last write, gpu/payload_rows.h; a loc outside [0, mark_slots) is skipped): the
// write's slots marked with no launch of their own.
struct ChunkPayload {
  uint64_t seed = 0;
  int64_t layer = 0;
  int64_t generation = 0;
  int64_t offset = 0;  // this buffer's first byte in the payload row (the widths of the buffers before it)
  uint32_t* mark = nullptr;
  int64_t mark_slots = 0;
};
Status LaunchWriteChunkRanks(const std::vector<WriteChunkJob>& jobs, int64_t n, int64_t page_size, int64_t row_bytes,
                             cudaStream_t stream, const ChunkPayload* made = nullptr);

// One rank's part of LaunchTranslateGatherRanks: its scratch (in, in_rows rows), its page_pos table and where its
// rows go.
struct TranslateGatherJob {
  void* out = nullptr;
  const void* in = nullptr;
  int64_t in_rows = 0;
  const int32_t* page_pos = nullptr;
  int64_t n_page_pos = 0;
};
// LaunchTranslate then LaunchGatherRows (bad = nullptr) for every job of `jobs` (all on the current device, rows of
// row_bytes) over the same n locs, in one launch: out[i] = in[translate(locs[i])], rows whose translation is -1 or
// past in_rows left as they are. Ranks emulated on one device read a layer with one launch instead of two per rank.
Status LaunchTranslateGatherRanks(const std::vector<TranslateGatherJob>& jobs, const int64_t* locs, int64_t n,
                                  int64_t page_size, int64_t row_bytes, cudaStream_t stream);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_KV_OPS_H_
