// Reference sharded pool: SGLang's per-rank pool/scratch mechanics executed for all ranks in memory.
#include "cpu_ref/sharded_pool.h"

#include <algorithm>
#include <cstring>

#include "core/spec.h"

namespace kvshard::ref {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string KeyText(const std::pair<int64_t, int64_t>& key) {
  return key.first < 0 ? "None" : StrCat("(", key.first, ", ", key.second, ")");
}

}  // namespace

uint32_t RowValue(int64_t layer, int64_t loc, int64_t salt, int64_t word) {
  return static_cast<uint32_t>(Mix(Mix(Mix(static_cast<uint64_t>(layer)) ^ static_cast<uint64_t>(loc)) ^
                                   (static_cast<uint64_t>(salt) << 20 | static_cast<uint64_t>(word))));
}

std::vector<uint32_t> RowValues(int64_t layer, const std::vector<int64_t>& locs, int64_t salt, int64_t row_words) {
  std::vector<uint32_t> rows;
  rows.reserve(locs.size() * row_words);
  for (int64_t loc : locs) {
    for (int64_t w = 0; w < row_words; ++w) rows.push_back(RowValue(layer, loc, salt, w));
  }
  return rows;
}

StatusOr<ShardedPool> ShardedPool::Create(const ShardedPoolConfig& c) {
  ExtendBatch geometry{c.shard_size, c.page_size, c.pages_per_rank, c.max_prefix_tokens, c.chunk_tokens, {}};
  KVSHARD_RETURN_IF_ERROR(ValidateExtendBatch(geometry));
  if (c.num_layers < 1 || c.num_layers > 4096) return InvalidArgument("num_layers: must be in [1, 4096]");
  if (c.row_words < 1 || c.row_words > 4096) return InvalidArgument("row_words: must be in [1, 4096]");
  const double bytes = 4.0 * c.row_words * c.shard_size *
                       (static_cast<double>(c.num_layers) * (c.pages_per_rank + 1) * c.page_size +
                        2.0 * (c.max_prefix_tokens + c.chunk_tokens + c.page_size));
  if (bytes > 1e9) return InvalidArgument("num_layers: the simulated pools would need ", bytes, " bytes (> 1 GB)");
  return ShardedPool(c);
}

ShardedPool::ShardedPool(const ShardedPoolConfig& c)
    : config_(c),
      rows_per_rank_((c.pages_per_rank + 1) * c.page_size),
      scratch_rows_(c.max_prefix_tokens + c.chunk_tokens + c.page_size),
      pools_(c.shard_size, std::vector<uint32_t>(c.num_layers * rows_per_rank_ * c.row_words, 0)),
      slots_(c.shard_size, std::vector<std::vector<uint32_t>>(2, std::vector<uint32_t>(scratch_rows_ * c.row_words))),
      keys_(c.shard_size, std::vector<std::pair<int64_t, int64_t>>(2, {-1, -1})),
      write_plan_(c.shard_size) {}

Status ShardedPool::BeginShardExtend(const std::vector<ExtendRequest>& requests) {
  ExtendBatch batch{config_.shard_size, config_.page_size, config_.pages_per_rank, config_.max_prefix_tokens,
                    config_.chunk_tokens, requests};
  GatherPlan next;
  KVSHARD_RETURN_IF_ERROR(planner_.Build(batch, &next));
  plan_ = std::move(next);
  page_pos_ = DensePagePos(plan_);
  ++epoch_;
  active_ = true;
  translate_cache_.clear();
  if (plan_.block_pages > 0) Prefetch(0);
  return Status::Ok();
}

void ShardedPool::Prefetch(int64_t layer) {
  if (layer >= config_.num_layers) return;
  const int64_t n = config_.shard_size, w = config_.row_words, s = layer % 2;
  const std::pair<int64_t, int64_t> key{layer, epoch_};
  if (keys_[0][s] == key) return;  // mirrored: every rank holds the same key
  const int64_t block_rows = plan_.block_pages * config_.page_size;
  // Each rank packs its send block in place: scratch[r*block : (r+1)*block] = pool[send_rows].
  for (int64_t r = 0; r < n; ++r) {
    const uint32_t* pool = pools_[r].data() + layer * rows_per_rank_ * w;
    uint32_t* send = slots_[r][s].data() + r * block_rows * w;
    const std::vector<int64_t>& rows = plan_.ranks[r].send_rows;
    for (int64_t i = 0; i < block_rows; ++i) std::memcpy(send + i * w, pool + rows[i] * w, w * sizeof(uint32_t));
  }
  // In-place regular all-gather: every rank receives every other rank's block at its block offset.
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t q = 0; q < n; ++q) {
      if (q == r) continue;
      std::memcpy(slots_[r][s].data() + q * block_rows * w, slots_[q][s].data() + q * block_rows * w,
                  block_rows * w * sizeof(uint32_t));
    }
    keys_[r][s] = key;
  }
  ++gathers_;
}

const std::vector<int64_t>& ShardedPool::TranslateCached(const std::vector<int64_t>& locs) {
  auto it = translate_cache_.find(locs);
  if (it != translate_cache_.end()) return it->second;
  std::vector<int64_t> rows(locs.size());
  const int64_t ps = config_.page_size;
  for (size_t i = 0; i < locs.size(); ++i) rows[i] = page_pos_[locs[i] / ps] * ps + locs[i] % ps;
  return translate_cache_.emplace(locs, std::move(rows)).first->second;
}

Status ShardedPool::CheckLayerAndLocs(int64_t layer, const std::vector<int64_t>& locs) const {
  if (layer < 0 || layer >= config_.num_layers) {
    return InvalidArgument("layer: must be in [0, ", config_.num_layers, "), got ", layer);
  }
  const int64_t limit = config_.shard_size * rows_per_rank_;
  for (size_t i = 0; i < locs.size(); ++i) {
    if (locs[i] < 0 || locs[i] >= limit) {
      return InvalidArgument("locs[", i, "]: must be in [0, ", limit, ") (the pool's slots), got ", locs[i]);
    }
  }
  return Status::Ok();
}

Status ShardedPool::Write(int64_t layer, const std::vector<int64_t>& locs, const std::vector<uint32_t>& rows) {
  KVSHARD_RETURN_IF_ERROR(CheckLayerAndLocs(layer, locs));
  const int64_t n = config_.shard_size, ps = config_.page_size, w = config_.row_words;
  if (rows.size() != locs.size() * w) {
    return InvalidArgument("rows: must hold locs.size() * row_words = ", locs.size() * w, " words, got ",
                           rows.size());
  }
  if (active_) {  // stage the full chunk into this layer's slot on every rank
    const std::vector<int64_t>& dst = TranslateCached(locs);
    for (int64_t r = 0; r < n; ++r) {
      uint32_t* scratch = slots_[r][layer % 2].data();
      for (size_t i = 0; i < locs.size(); ++i) std::memcpy(scratch + dst[i] * w, &rows[i * w], w * sizeof(uint32_t));
    }
  }
  if (write_plan_epoch_ != epoch_ || write_plan_locs_ != locs) {  // owner filter, once per (locs, epoch)
    for (int64_t r = 0; r < n; ++r) write_plan_[r].clear();
    for (size_t i = 0; i < locs.size(); ++i) {
      const int64_t owner = (locs[i] % (n * ps)) / ps;
      write_plan_[owner].push_back({static_cast<int64_t>(i), (locs[i] / (n * ps)) * ps + locs[i] % ps});
    }
    write_plan_locs_ = locs;
    write_plan_epoch_ = epoch_;
    ++write_plan_builds_;
  }
  for (int64_t r = 0; r < n; ++r) {
    uint32_t* pool = pools_[r].data() + layer * rows_per_rank_ * w;
    for (const auto& [idx, row] : write_plan_[r]) std::memcpy(pool + row * w, &rows[idx * w], w * sizeof(uint32_t));
  }
  return Status::Ok();
}

StatusOr<std::vector<std::vector<uint32_t>>> ShardedPool::Read(int64_t layer, const std::vector<int64_t>& locs) {
  if (!active_) {
    return FailedPrecondition("sharded pool read outside an active sharded extend batch "
                              "(begin_shard_extend not called?)");
  }
  KVSHARD_RETURN_IF_ERROR(CheckLayerAndLocs(layer, locs));
  const int64_t n = config_.shard_size, w = config_.row_words, s = layer % 2;
  if (plan_.block_pages > 0) {
    for (int64_t r = 0; r < n; ++r) {
      if (keys_[r][s] != std::pair<int64_t, int64_t>{layer, epoch_}) {
        return FailedPrecondition("prefix scratch miss for layer ", layer, " (resident=", KeyText(keys_[r][s]),
                                  ", epoch=", epoch_, ")");
      }
    }
  }
  Prefetch(layer + 1);
  const std::vector<int64_t>& src = TranslateCached(locs);
  std::vector<std::vector<uint32_t>> out(n, std::vector<uint32_t>(locs.size() * w));
  for (int64_t r = 0; r < n; ++r) {
    const uint32_t* scratch = slots_[r][s].data();
    for (size_t i = 0; i < locs.size(); ++i) std::memcpy(&out[r][i * w], scratch + src[i] * w, w * sizeof(uint32_t));
  }
  return out;
}

std::vector<uint32_t> ShardedPool::LocalRow(int64_t rank, int64_t layer, int64_t local_row) const {
  const int64_t w = config_.row_words;
  const uint32_t* p = pools_[rank].data() + (layer * rows_per_rank_ + local_row) * w;
  return std::vector<uint32_t>(p, p + w);
}

StatusOr<UnshardedPool> UnshardedPool::Create(const ShardedPoolConfig& c) {
  KVSHARD_RETURN_IF_ERROR(ValidatePlacementSpec({c.shard_size, c.page_size}));
  const double words = static_cast<double>(c.shard_size) * (c.pages_per_rank + 1) * c.page_size * c.num_layers *
                       c.row_words;
  if (c.pages_per_rank < 0 || c.num_layers < 1 || c.row_words < 1 || words > 2.5e8) {
    return InvalidArgument("pages_per_rank: baseline pool geometry out of range");
  }
  return UnshardedPool(c.shard_size * (c.pages_per_rank + 1) * c.page_size, c.num_layers, c.row_words);
}

Status UnshardedPool::Write(int64_t layer, const std::vector<int64_t>& locs, const std::vector<uint32_t>& rows) {
  if (layer < 0 || layer >= layers_) return InvalidArgument("layer: must be in [0, ", layers_, "), got ", layer);
  if (rows.size() != locs.size() * words_) return InvalidArgument("rows: must hold locs.size() * row_words words");
  for (size_t i = 0; i < locs.size(); ++i) {
    if (locs[i] < 0 || locs[i] >= slots_) return InvalidArgument("locs[", i, "]: out of range, got ", locs[i]);
    std::memcpy(&data_[(layer * slots_ + locs[i]) * words_], &rows[i * words_], words_ * sizeof(uint32_t));
  }
  return Status::Ok();
}

StatusOr<std::vector<uint32_t>> UnshardedPool::Read(int64_t layer, const std::vector<int64_t>& locs) const {
  if (layer < 0 || layer >= layers_) return InvalidArgument("layer: must be in [0, ", layers_, "), got ", layer);
  std::vector<uint32_t> out(locs.size() * words_);
  for (size_t i = 0; i < locs.size(); ++i) {
    if (locs[i] < 0 || locs[i] >= slots_) return InvalidArgument("locs[", i, "]: out of range, got ", locs[i]);
    std::memcpy(&out[i * words_], &data_[(layer * slots_ + locs[i]) * words_], words_ * sizeof(uint32_t));
  }
  return out;
}

}  // namespace kvshard::ref
