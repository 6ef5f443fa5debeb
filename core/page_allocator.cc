// The allocator checks both allocators share, each error message exactly as the reference has always worded it.
#include "core/page_allocator.h"

namespace kvshard {

Status ValidateAllocatorConfig(const AllocatorConfig& config) {
  KVSHARD_RETURN_IF_ERROR(ValidatePlacementSpec({config.shard_size, config.page_size}));
  if (config.pages_per_rank < 0 || config.pages_per_rank >= kMaxPoolLogicalPages / config.shard_size) {
    return InvalidArgument("pages_per_rank: must be in [0, ", kMaxPoolLogicalPages / config.shard_size,
                           ") so that shard_size*(pages_per_rank+1) <= 2^24, got ", config.pages_per_rank);
  }
  return Status::Ok();
}

Status ValidateAllocBatchLengths(const AllocBatch& batch) {
  const size_t reqs = batch.prefix_lens.size();
  if (batch.seq_lens.size() != reqs || batch.rotation_bases.size() != reqs || batch.last_locs.size() != reqs) {
    return InvalidArgument(
        "seq_lens: prefix_lens, seq_lens, rotation_bases and last_locs must have equal "
        "lengths, got ",
        reqs, ", ", batch.seq_lens.size(), ", ", batch.rotation_bases.size(), ", ", batch.last_locs.size());
  }
  return Status::Ok();
}

Status ValidateByClassesLengths(const AllocBatch& batch, size_t page_classes) {
  const size_t reqs = batch.prefix_lens.size();
  if (batch.seq_lens.size() != reqs || batch.rotation_bases.size() != reqs || page_classes != reqs) {
    return InvalidArgument(
        "page_classes: prefix_lens, seq_lens, rotation_bases and page_classes must have equal "
        "lengths, got ",
        reqs, ", ", batch.seq_lens.size(), ", ", batch.rotation_bases.size(), ", ", page_classes);
  }
  return Status::Ok();
}

Status ExtendRequestError(const AllocBatch& batch, size_t i, int64_t ps) {
  const int64_t prefix_len = batch.prefix_lens[i], seq_len = batch.seq_lens[i];
  if (prefix_len < 0 || prefix_len >= kMaxSlot || prefix_len % ps != 0) {
    return InvalidArgument("prefix_lens[", i, "]: must be a page-aligned multiple of page_size (", ps,
                           ") in [0, 2^48), got ", prefix_len);
  }
  if (seq_len < 0 || seq_len >= kMaxSlot)
    return InvalidArgument("seq_lens[", i, "]: must be in [0, 2^48), got ", seq_len);
  if (PositionPages(seq_len, ps) - prefix_len / ps <= 0) {
    return InvalidArgument("seq_lens[", i, "]: must need at least one new page past prefix_len ", prefix_len,
                           " (page_size ", ps, "), got ", seq_len);
  }
  return Status::Ok();
}

Status RotationBaseError(const AllocBatch& batch, size_t i, int64_t shard_size) {
  return InvalidArgument("rotation_bases[", i, "]: must be null or in [0, ", shard_size, "), got ",
                         batch.rotation_bases[i]);
}

Status CheckLastLoc(const AllocBatch& batch, size_t i, int64_t base, int64_t prefix_pages,
                    const AllocatorConfig& config) {
  const int64_t n = config.shard_size, ps = config.page_size, last_loc = batch.last_locs[i];
  const int64_t owner = (last_loc % (n * ps)) / ps, want = (base + prefix_pages - 1) % n;
  if (last_loc < 0 || owner != want) {
    return InvalidArgument("last_locs[", i, "]: owner ", owner, " of last_loc ", last_loc,
                           " breaks the cyclic rotation (base ", base, ", ", prefix_pages,
                           " prefix pages: expected owner ", want, ")");
  }
  return Status::Ok();
}

Status ValidatePageClasses(const std::vector<int64_t>& page_classes, size_t i, int64_t new_pages, int64_t n) {
  if (static_cast<int64_t>(page_classes.size()) != new_pages) {
    return InvalidArgument("page_classes[", i, "]: must name one class per new page (", new_pages, "), got ",
                           page_classes.size());
  }
  for (size_t j = 0; j < page_classes.size(); ++j) {
    const int64_t c = page_classes[j];
    if (c < 0 || c >= n) return InvalidArgument("page_classes[", i, "][", j, "]: must be in [0, ", n, "), got ", c);
  }
  return Status::Ok();
}

Status ValidateFreeLocs(const std::vector<int64_t>& locs, const AllocatorConfig& config,
                        const std::vector<uint8_t>& allocated) {
  const int64_t ps = config.page_size;
  const int64_t slots = static_cast<int64_t>(allocated.size()) * ps;
  for (size_t i = 0; i < locs.size(); ++i) {
    if (locs[i] < 0 || locs[i] >= slots) {
      return InvalidArgument("locs[", i, "]: slot ", locs[i], " is outside the pool [0, ", slots, ")");
    }
    const int64_t page = locs[i] / ps;
    if (page < config.shard_size || !allocated[page]) {
      return InvalidArgument("locs[", i, "]: page ", page, " (slot ", locs[i],
                             ") is not allocated (double free or reserved page)");
    }
  }
  return Status::Ok();
}

Status InFreeGroup(size_t f, const Status& s) {
  return Status(s.code(), StrCat("frees[", f, "]", s.message().substr(4)));  // "locs[i]: ..." -> "frees[f][i]: ..."
}

Status FreeGroupAlreadyOpen() { return FailedPrecondition("free_group: a free group is already open"); }

Status NoFreeGroupOpen() { return FailedPrecondition("free_group: no free group is open"); }

std::vector<int64_t> ExtendSlots(const AllocBatch& batch, const ExtendPages& pages, int64_t page_size) {
  std::vector<int64_t> slots;
  for (size_t i = 0; i + 1 < pages.offsets.size(); ++i) {
    const int64_t len = batch.seq_lens[i] - batch.prefix_lens[i];
    for (int64_t off = 0; off < len; ++off) {
      slots.push_back(pages.pages[pages.offsets[i] + off / page_size] * page_size + off % page_size);
    }
  }
  return slots;
}

}  // namespace kvshard
