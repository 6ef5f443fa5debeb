// Structural validation of extend batches.
#include "core/gather_plan.h"

#include "core/spec.h"

namespace kvshard {

Status ValidateExtendBatchGeometry(const ExtendBatch& b) {
  KVSHARD_RETURN_IF_ERROR(ValidatePlacementSpec({b.shard_size, b.page_size}));
  const int64_t n = b.shard_size;
  if (b.pages_per_rank < 0 || b.pages_per_rank >= kMaxPoolLogicalPages / n - 1) {
    return InvalidArgument("pages_per_rank: must be in [0, ", kMaxPoolLogicalPages / n - 1,
                           ") so that page_pos, shard_size*(pages_per_rank+2) entries, stays <= 2^24, got ",
                           b.pages_per_rank);
  }
  const int64_t lps = n * b.page_size;
  if (b.max_prefix_tokens < 0 || b.max_prefix_tokens >= kMaxSlot || b.max_prefix_tokens % lps != 0) {
    return InvalidArgument("max_prefix_tokens: must be a non-negative multiple of shard_size*page_size (", lps,
                           ") below 2^48, got ", b.max_prefix_tokens);
  }
  if (b.chunk_tokens < 0 || b.chunk_tokens >= kMaxSlot || b.chunk_tokens % b.page_size != 0) {
    return InvalidArgument("chunk_tokens: must be a non-negative multiple of page_size (", b.page_size,
                           ") below 2^48, got ", b.chunk_tokens);
  }
  return Status::Ok();
}

Status ValidateExtendRequest(const ExtendBatch& b, size_t i) {
  const int64_t n = b.shard_size;
  const int64_t lo = n, hi = n * (b.pages_per_rank + 1);  // allocatable logical pages [N, N*(pages_per_rank+1))
  const ExtendRequest& r = b.requests[i];
  if (r.prefix_len < 0 || r.prefix_len >= kMaxSlot) {
    return InvalidArgument("requests[", i, "].prefix_len: must be in [0, 2^48), got ", r.prefix_len);
  }
  if (r.seq_len < r.prefix_len || r.seq_len >= kMaxSlot) {
    return InvalidArgument("requests[", i, "].seq_len: must be >= prefix_len (", r.prefix_len, ") and < 2^48, got ",
                           r.seq_len);
  }
  const int64_t want = PositionPages(r.seq_len, b.page_size);
  if (static_cast<int64_t>(r.pages.size()) != want) {
    return InvalidArgument("requests[", i, "].pages: must list ceil(seq_len/page_size) = ", want, " pages, got ",
                           r.pages.size());
  }
  // Branch-free min/max first (vectorizes); locate the offending page only on failure.
  int64_t min_page = hi, max_page = lo;
  for (int64_t p : r.pages) {
    min_page = p < min_page ? p : min_page;
    max_page = p > max_page ? p : max_page;
  }
  if (min_page < lo || max_page >= hi) {
    for (size_t j = 0; j < r.pages.size(); ++j) {
      if (r.pages[j] < lo || r.pages[j] >= hi) {
        return InvalidArgument("requests[", i, "].pages[", j, "]: page ", r.pages[j], " out of pool range [", lo, ", ",
                               hi, ") (pages < shard_size are reserved)");
      }
    }
  }
  return Status::Ok();
}

Status ValidateExtendBatch(const ExtendBatch& b) {
  KVSHARD_RETURN_IF_ERROR(ValidateExtendBatchGeometry(b));
  for (size_t i = 0; i < b.requests.size(); ++i) KVSHARD_RETURN_IF_ERROR(ValidateExtendRequest(b, i));
  return Status::Ok();
}

Status MisalignedPrefixError(size_t i, int64_t prefix_len, int64_t page_size) {
  return InvalidArgument("requests[", i,
                         "].prefix_len: sharded prefill requires physical-page-aligned prefixes "
                         "(the radix-tree match quantum), got prefix_len=",
                         prefix_len, ", page_size=", page_size);
}

Status NonCyclicPrefixError(size_t i, std::span<const int64_t> prefix_pages, int64_t shard_size) {
  std::string owners = "[";  // Python's owners[:16]
  for (size_t k = 0; k < prefix_pages.size() && k < 16; ++k) {
    owners += (k ? ", " : "") + std::to_string(prefix_pages[k] % shard_size);
  }
  return InvalidArgument("requests[", i, "].pages: sharded prefix owners of request ", i,
                         " are not cyclic — rotation base out of sync (owners[:16]=", owners, "])");
}

Status PrefixCapacityError(int64_t prefix_pages, int64_t prefix_tokens, int64_t max_prefix_tokens) {
  return OutOfRange("max_prefix_tokens: prefix (", prefix_pages, " pages, padded gather span ", prefix_tokens,
                    " tokens) exceeds the scratch prefix capacity (", max_prefix_tokens,
                    ") — the PrefillAdder scratch reservation should have deferred this batch");
}

Status ChunkCapacityError(int64_t chunk_page_tokens, int64_t chunk_tokens) {
  return OutOfRange("chunk_tokens: chunk (", chunk_page_tokens, " tokens) exceeds the scratch chunk capacity (",
                    chunk_tokens, ")");
}

Status StaleChunkPageError(size_t i, size_t j, int64_t page) {
  return InvalidArgument("requests[", i, "].pages[", j, "]: chunk page ", page,
                         " is already in the plan (a prefix page or an earlier chunk page); chunk pages must be "
                         "fresh allocations");
}

std::vector<int64_t> DensePagePos(const GatherPlan& plan) {
  std::vector<int64_t> pos(plan.page_pos_size, plan.trash_page);
  for (size_t i = 0; i < plan.mapped_pages.size(); ++i) pos[plan.mapped_pages[i]] = plan.mapped_scratch_pages[i];
  return pos;
}

const std::vector<int64_t>& DensePagePosCache::Update(const GatherPlan& plan) {
  if (static_cast<int64_t>(pos_.size()) != plan.page_pos_size || trash_ != plan.trash_page) {
    pos_.assign(static_cast<size_t>(plan.page_pos_size), plan.trash_page);
  } else {
    for (int64_t page : mapped_) pos_[page] = plan.trash_page;
  }
  for (size_t i = 0; i < plan.mapped_pages.size(); ++i) pos_[plan.mapped_pages[i]] = plan.mapped_scratch_pages[i];
  mapped_ = plan.mapped_pages;
  trash_ = plan.trash_page;
  return pos_;
}

StatusOr<std::vector<int64_t>> Translate(const GatherPlan& plan, const std::vector<int64_t>& locs, const char* field) {
  const int64_t ps = plan.page_size, limit = plan.page_pos_size * ps;
  for (size_t i = 0; i < locs.size(); ++i) {
    if (locs[i] < 0 || locs[i] >= limit) {
      return InvalidArgument(field, "[", i, "]: must be in [0, ", limit, ") (the page_pos range), got ", locs[i]);
    }
  }
  const std::vector<int64_t> pos = DensePagePos(plan);
  std::vector<int64_t> rows(locs.size());
  for (size_t i = 0; i < locs.size(); ++i) rows[i] = pos[locs[i] / ps] * ps + locs[i] % ps;
  return rows;
}

}  // namespace kvshard
