// The gather plan of a sharded extend batch (SGLang begin_shard_extend, spec §3) built on the device: dedup,
// owner-major slots, page_pos and send pages by grid-wide launches (key flags + CUB device scan), plus the
// expansion of one rank's send rows. Any batch the reference accepts. Host-safe header.
#ifndef KVSHARD_GPU_GATHER_PLAN_H_
#define KVSHARD_GPU_GATHER_PLAN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "core/gather_plan.h"
#include "core/status.h"
#include "gpu/device.h"
#include "gpu/stream.h"

namespace kvshard::gpu {

// Validates what the host can check before launching: batch structure (names the field, as the reference
// does) and int32 page_pos slots. No request or page-reference limit.
Status GatherPlanCanImplement(const ExtendBatch& batch);

// Builds plans on the current device; keeps page_pos resident (only the previous batch's entries are reset).
class DeviceGatherPlanner {
 public:
  // Sizes the device buffers for batches of this geometry (page_pos_size entries, filled with the trash page).
  static StatusOr<std::unique_ptr<DeviceGatherPlanner>> Create(const ExtendBatch& geometry);

  // Uploads the batch's page rows (as req_to_token would already be on the device), untimed: one pinned staging
  // buffer, copied asynchronously on `stream` (the copies are ordered before Launch's kernels on that stream).
  Status Upload(const ExtendBatch& batch, cudaStream_t stream);
  // Builds the plan of the uploaded batch on `stream` without a host round trip: page_pos, send pages of
  // every rank, and the send rows of `send_rank`. Errors are detected on the device; call Finish to see them.
  Status Launch(int64_t send_rank, cudaStream_t stream);
  // The most work (entries of the largest list a build walks: key space, references, mapped pages, send rows) one
  // block builds a plan for, in one launch; larger batches take the grid-wide launches. 0: always those (the tests
  // pin both forms against the reference).
  void set_one_block_work(int64_t work) { one_block_work_ = work; }
  // Synchronizes and returns the build's status: SGLang's errors ("page-aligned", "cyclic", "capacity", and
  // non-fresh chunk pages) with the same first-failing request as the reference.
  Status Finish(cudaStream_t stream);
  // Finish, then the plan as the reference's GatherPlan (send_rows expanded for every rank) for diffing: the build's
  // state, page_pos and send pages come back in one synchronization of `stream`. A page_pos of more than
  // max_dense_download_bytes comes back as the build's mapped pages with their entries, counted on the device against
  // the dense table's every entry off the trash page: where they disagree (a stray entry) the dense table comes back
  // after all, so the plan is always the dense table's.
  StatusOr<GatherPlan> Download(cudaStream_t stream);
  // Download's bound for bringing page_pos back dense (a few KiB cost less than the launch that compacts it; a
  // Mooncake-sized pool's 1.25 MB a batch cost more than the build). 0: always the mapped pages (tests pin both).
  void set_max_dense_download_bytes(int64_t bytes) { max_dense_download_bytes_ = bytes; }

  // Device page_pos (int32, page_pos_size entries) and send rows of `send_rank` (block_pages * ps entries).
  const int32_t* page_pos() const { return page_pos_at_; }
  const int64_t* send_rows() const { return send_rows_.as<int64_t>(); }
  int64_t block_pages() const { return block_pages_; }
  int64_t page_pos_size() const { return page_pos_size_; }

 private:
  DeviceGatherPlanner() = default;
  // The build's errors from its state words (kStateWords int64, copied back after the build).
  Status CheckState(const int64_t* state) const;
  ExtendBatch geometry_;  // requests empty
  ExtendBatch batch_;     // the uploaded batch (host copy of its metadata)
  int64_t page_pos_size_ = 0;
  int64_t trash_page_ = 0;
  int64_t block_pages_ = 0;
  int64_t n_prefix_refs_ = 0, n_chunk_ = 0, first_misaligned_ = -1;
  // The build's answers, downloaded with one copy: [state words | page_pos], page_pos resident between builds.
  DeviceBuffer answers_;
  int64_t* state_at_ = nullptr;     // int64 [kStateWords]: mapped count, first cyclic request, first stale chunk ref,
                                    // unique, overflow, entries off the trash page (Download's count)
  int32_t* page_pos_at_ = nullptr;  // int32 [page_pos_size]
  // The batch, uploaded with one copy: [req_meta (int64 [4 * (B + 1)]: page offset, prefix pages, chunk offset, block
  // offset) | pages (int64, all position-pages of the batch, request-major)].
  DeviceBuffer meta_and_pages_;
  DeviceBuffer send_pages_;  // int64 [N * block_pages]
  DeviceBuffer send_rows_;   // int64 [block_pages * ps]
  DeviceBuffer mapped_;      // int64 pages mapped by the previous build (reset to trash by the next)
  DeviceBuffer flags_;       // int32 [keys_ + 1]: prefix key flags (all 0 between builds)
  DeviceBuffer scan_;        // int32 [keys_ + 1]: exclusive prefix of flags_
  DeviceBuffer scan_temp_;   // CUB scan storage
  int64_t keys_ = 0;         // shard_size * (pages_per_rank + 2)
  int64_t capacity_pages_ = 0;
  PinnedBuffer upload_;  // Upload's req_meta then pages (reused; refilled once the last build's copies are done)
  bool idle_ = true;     // nothing of this planner's is in flight (Finish or Download synchronized after it)
  int64_t one_block_work_ = int64_t{1} << 14;  // set_one_block_work
  PinnedBuffer download_;                      // Download's state words, page_pos and send pages
  DeviceBuffer mapped_pairs_;                  // Download's (page, page_pos entry) of each mapped page, int64 pairs
  int64_t max_dense_download_bytes_ = int64_t{64} << 10;  // set_max_dense_download_bytes
};

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_GATHER_PLAN_H_
