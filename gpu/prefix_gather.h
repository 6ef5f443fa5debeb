// The layer-ahead prefix gather of the sharded KV pool, as in SGLang's page_interleave_pool (spec §3):
// per-rank pools, two scratch slots [prefix | chunk | trash page] per rank, a dedicated gather stream and
// communicator, an in-place all-gather of each rank's padded send block, ready events, residency keys
// (layer, epoch), and "reading layer l waits on its slot and kicks layer l+1"; every (pool buffer, scratch
// tensor) pair of a layer (MHA K and V, MLA latent, extras) moves in one all-gather. Host-safe header.
#ifndef KVSHARD_GPU_PREFIX_GATHER_H_
#define KVSHARD_GPU_PREFIX_GATHER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/spec.h"
#include "core/status.h"
#include "gpu/collective.h"
#include "gpu/device.h"
#include "gpu/kv_ops.h"
#include "gpu/stream.h"

namespace kvshard::gpu {

// Sizes of one rank's pool and scratch.
struct PrefixGatherShape {
  int64_t layers = 1;
  int64_t pool_rows = 0;  // rows per layer per rank (local pages * page_size, incl. trash page 0)
  int64_t page_size = 1;
  int64_t max_prefix_tokens = 0;
  int64_t chunk_tokens = 0;
  int64_t row_bytes = 0;                  // the one-buffer form's row width (used when buffer_row_bytes is empty)
  int64_t n_page_pos = 0;                 // logical pages covered by page_pos
  std::vector<int64_t> buffer_row_bytes;  // per-layer buffers' row widths (SGLang's _gather_pairs), in order
  // Local ranks on one device share one stream for packs, all-gathers and compute (replay's data path: its answers
  // do not depend on overlap, and one stream needs no event between streams); ignored across devices.
  bool one_stream = false;
  // One stream: BeginExtendMapped uploads a page_pos of at most this many bytes dense (a copy of a few KiB costs less
  // than the two launches that set it on the device), a larger one as its mapped pages.
  int64_t max_dense_page_pos_bytes = int64_t{64} << 10;
  int64_t scratch_rows() const { return max_prefix_tokens + chunk_tokens + page_size; }
  // The buffers' row widths: buffer_row_bytes, or {row_bytes}.
  std::vector<int64_t> buffers() const {
    return buffer_row_bytes.empty() ? std::vector<int64_t>{row_bytes} : buffer_row_bytes;
  }
};

// Validates a shape for an n-rank group (sizes positive, capacities page-aligned as SGLang asserts).
Status PrefixGatherCanImplement(const PrefixGatherShape& shape, int n_ranks);

// One shard group's pools and layer-ahead gather; drives every rank local to this process.
class LayerAheadGather {
 public:
  // Allocates pools and slots on each local rank's device; `comm` must be dedicated to this object.
  static StatusOr<std::unique_ptr<LayerAheadGather>> Create(RankGroup* comm, const PrefixGatherShape& shape);
  ~LayerAheadGather();

  const PrefixGatherShape& shape() const { return shape_; }
  int local_count() const { return static_cast<int>(ranks_.size()); }
  // Local rank i's pool of `layer` (pool_rows x row_bytes, device memory) of buffer `buffer`.
  void* pool(int i, int64_t layer, int buffer = 0) const;
  // Local rank i's compute stream (writes and reads are ordered on it).
  cudaStream_t compute_stream(int i) const;
  // Every local rank's every stream is one stream (shape.one_stream, ranks on one device).
  bool one_stream() const { return one_stream_; }

  // Installs a batch plan mirrored on every rank: block_pages, page_pos (n_page_pos entries) and each local
  // rank's send rows (block_pages * page_size local pool rows), plus the batch's chunk locs (out_cache_loc).
  // Bumps the epoch and kicks the first layer's gather (when block_pages > 0).
  Status BeginExtend(int64_t block_pages, const std::vector<int32_t>& page_pos,
                     const std::vector<std::vector<int64_t>>& send_rows, const std::vector<int64_t>& chunk_locs);
  // A batch's page_pos as a gather plan gives it (core/gather_plan.h): every logical page on the trash page but
  // pages[k], on scratch_pages[k].
  struct PagePosMap {
    int64_t trash_page = 0;
    std::span<const int64_t> pages, scratch_pages;
  };
  // BeginExtend with page_pos given by its mapped pages (each in [0, n_page_pos), its scratch page in int32) and send
  // rows and chunk locs as views: ranks on one stream upload only the mapped pages and set page_pos on the device
  // where the dense table passes shape.max_dense_page_pos_bytes, so a large pool's batch costs its own pages, not the
  // pool's; other groups, and smaller tables, upload page_pos dense.
  Status BeginExtendMapped(int64_t block_pages, const PagePosMap& page_pos,
                           const std::vector<std::span<const int64_t>>& send_rows, std::span<const int64_t> chunk_locs);
  // set_kv_buffer for `layer`: rows[i] (device, one row per chunk loc, on local rank i's device) is staged
  // in full into the layer's slot at translate(loc) and its owned rows are written to the pool.
  Status WriteLayer(int64_t layer, const std::vector<const void*>& rows);
  // WriteLayer of every buffer: rows[i][b] holds buffer b's rows on local rank i's device.
  Status WriteLayerBuffers(int64_t layer, const std::vector<std::vector<const void*>>& rows);
  // WriteLayerBuffers of rows made where they are written, not read from memory: chunk row i of every buffer is its
  // part of replay's payload row of (layer, chunk loc i, generation) from `seed` (core/payload.h; one launch a buffer
  // and no row-making launch before it). Needs CanWriteMade.
  // With `mark`, the chunk locs are also marked with `generation` in that table of mark_slots entries
  // (ChunkPayload::mark), in the same launch.
  Status WriteLayerMade(int64_t layer, uint64_t seed, int64_t generation, uint32_t* mark = nullptr,
                        int64_t mark_slots = 0);
  // Every local rank on one device, and few enough for one launch (kMaxRankJobs).
  bool CanWriteMade() const;
  // Each compute stream waits for `layer`'s slot (residency must be (layer, epoch)) and the gather of
  // layer + 1 is kicked (its send block packed now, its collective issued by the next read or EndExtend).
  // Returns each local rank's slot (scratch_rows x row_bytes).
  StatusOr<std::vector<void*>> AcquireForRead(int64_t layer);
  // AcquireForRead returning every buffer's scratch tensor: [local rank][buffer] (scratch_rows x row_bytes_b).
  StatusOr<std::vector<std::vector<void*>>> AcquireBuffersForRead(int64_t layer);
  // Marks no sharded extend in flight (later reads are errors) and issues any kicked collective, so every
  // rank issues the same collectives.
  Status EndExtend();
  int64_t epoch() const { return epoch_; }
  // Device page_pos of local rank i (for translating reads); valid until the next BeginExtend.
  const int32_t* page_pos(int i) const;
  // Device chunk locs of local rank i; valid until the next BeginExtend.
  const int64_t* chunk_locs(int i) const;
  // Rows skipped for out-of-range indices since creation (must stay 0); waits for everything issued on every
  // rank's streams (the group's deadline), so nothing is in flight on return.
  StatusOr<int64_t> BadRows();
  // One stream only: rank 0's device counter of the rows BadRows counts (every rank counts there).
  const int64_t* bad_counter() const;
  // Collectives packed but not issued yet (EndExtend would issue them).
  bool gathers_pending() const { return !pending_.empty(); }
  // One stream only: copies the count BadRows returns to device memory `to` on that stream, after everything issued
  // so far (no host wait: the caller copies it back with its own answers).
  Status CopyBadRows(int64_t* to);

  // Device timeline of local rank 0 for diagnostics: when on, every pack and all-gather (and any span the
  // caller brackets with TraceBegin/TraceEnd) records timing events.
  struct TraceSpan {
    std::string label;
    double start_us = 0, end_us = 0;  // relative to the first traced event
  };
  void set_trace(bool on) { trace_ = on; }
  void TraceBegin(const std::string& label, cudaStream_t stream);
  void TraceEnd(cudaStream_t stream);
  // Synchronizes and returns the spans recorded since the last call, in recording order.
  StatusOr<std::vector<TraceSpan>> TakeTrace();

 private:
  struct Rank;
  LayerAheadGather(RankGroup* comm, const PrefixGatherShape& shape);
  // BeginExtend's body, page_pos either dense (`dense`: n_page_pos entries) or (ranks on one stream only) `mapped`.
  Status BeginExtendImpl(int64_t block_pages, const int32_t* dense, const PagePosMap* mapped,
                         const std::vector<std::span<const int64_t>>& send_rows, std::span<const int64_t> chunk_locs);
  // Packs `layer`'s send block into its slot (pack stream, after all compute work so far); marks it resident.
  Status Pack(int64_t layer);
  // BeginExtend's device work once the plan is up, every rank on one stream with one buffer: the batch's write plans
  // and the packs and emulated all-gathers of layers 0 and 1 in one launch (layer 1 resident from layer 0's read).
  Status StartOnOneStream(int64_t block_pages, int64_t n);
  // Every local rank's write plan buffers, for LaunchBuildWritePlans and LaunchBatchStartRanks.
  std::vector<WritePlanOut> WritePlanOuts() const;
  // Unavailable once the group was aborted: an emulated all-gather on one stream asks the group as a collective would.
  Status CheckNotAborted() const;
  // Orders `r`'s compute stream after its pack and gather streams' work so far (nothing for one stream).
  Status AfterPackAndGather(Rank& r);
  // Local rank 0's compute stream after every rank's compute work so far, and every rank's after rank 0's
  // (nothing where they are one stream).
  Status JoinComputeStreams();
  // Ranks on one device: a layer's chunk staged and scattered for every rank with one launch a buffer, of `rows`
  // ([rank][buffer]) or, where rows is null, of replay's payload rows of (layer, chunk loc, generation) from `seed`.
  Status WriteChunkAllRanks(int64_t layer, const std::vector<std::vector<const void*>>* rows, uint64_t seed,
                            int64_t generation, uint32_t* mark = nullptr, int64_t mark_slots = 0);
  Status ForkComputeStreams();
  // Issues the in-place all-gathers of packed layers <= upto, in layer order, and records their ready events:
  // one all-gather per layer; with several buffers it gathers the packed blocks, then splits them per buffer.
  Status IssueGathers(int64_t upto);

  RankGroup* comm_;
  PrefixGatherShape shape_;
  std::vector<int> ranks_;
  std::vector<std::unique_ptr<Rank>> state_;
  int64_t epoch_ = 0;
  int64_t block_pages_ = 0;
  int64_t n_chunk_locs_ = 0;
  bool active_ = false;
  std::pair<int64_t, int64_t> resident_[2] = {{-1, -1}, {-1, -1}};
  std::pair<int64_t, int64_t> prepacked_ = {-1, -1};  // (layer, epoch) packed by StartOnOneStream, not yet resident
  std::vector<int64_t> pending_;
  bool trace_ = false;
  struct TraceEvents;
  std::vector<std::unique_ptr<TraceEvents>>
      trace_events_;            // layers packed whose all-gather is not issued yet (at most two)
  bool shared_device_ = false;  // every local rank on one device (emulated ranks)
  bool one_stream_ = false;     // ... and all of them on local rank 0's compute stream
  PinnedBuffer plan_upload_;    // BeginExtend's page_pos, chunk locs and send rows, copied to every rank from here
  DeviceBuffer plan_;           // one stream: plan_upload_ copied once, every rank's plan views into it
};

// A per-layer compute stand-in for benchmarks: `blocks` blocks (0 = one per SM) for about `ns` nanoseconds,
// either busy (4 warps issuing nonstop) or sleeping (1 warp, __nanosleep between timer reads).
Status LaunchComputeStandIn(int64_t ns, bool busy, cudaStream_t stream, int blocks = 0);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_PREFIX_GATHER_H_
