// Validation of the shard specs: every bad field becomes an InvalidArgument naming it.
#include "core/spec.h"

namespace kvshard {

Status ValidatePlacementSpec(const PlacementSpec& spec) {
  if (spec.shard_size < 1 || spec.shard_size > kMaxShardSize) {
    return InvalidArgument("shard_size: must be in [1, ", kMaxShardSize, "], got ", spec.shard_size);
  }
  if (spec.page_size < 1 || spec.page_size > kMaxPageSize) {
    return InvalidArgument("page_size: must be in [1, ", kMaxPageSize, "], got ", spec.page_size);
  }
  return Status::Ok();
}

Status ValidateRank(int64_t rank, int64_t shard_size, const char* field) {
  if (rank < 0 || rank >= shard_size) {
    return InvalidArgument(field, ": must be in [0, ", shard_size, "), got ", rank);
  }
  return Status::Ok();
}

Status ValidateLocs(const std::vector<int64_t>& locs, const char* field) {
  for (size_t i = 0; i < locs.size(); ++i) {
    if (locs[i] < 0 || locs[i] >= kMaxSlot) {
      return InvalidArgument(field, "[", i, "]: must be in [0, 2^48), got ", locs[i]);
    }
  }
  return Status::Ok();
}

Status ValidatePageShardSpec(const PageShardSpec& spec) {
  KVSHARD_RETURN_IF_ERROR(ValidatePlacementSpec(spec.placement()));
  KVSHARD_RETURN_IF_ERROR(ValidateRank(spec.shard_rank, spec.shard_size, "shard_rank"));
  if (spec.max_prefix_tokens < 0 || spec.max_prefix_tokens >= kMaxSlot ||
      spec.max_prefix_tokens % spec.logical_page_size() != 0) {
    return InvalidArgument("max_prefix_tokens: must be a non-negative multiple of shard_size*page_size (",
                           spec.logical_page_size(), "), got ", spec.max_prefix_tokens);
  }
  if (spec.chunk_tokens < 0 || spec.chunk_tokens >= kMaxSlot || spec.chunk_tokens % spec.page_size != 0) {
    return InvalidArgument("chunk_tokens: must be a non-negative multiple of page_size (", spec.page_size, "), got ",
                           spec.chunk_tokens);
  }
  return Status::Ok();
}

}  // namespace kvshard
