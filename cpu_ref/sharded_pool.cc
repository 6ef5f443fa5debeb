// Reference sharded pool: SGLang's per-rank pool/scratch mechanics executed for all ranks in memory, every
// (pool buffer, scratch tensor) pair of a layer moved together.
#include "cpu_ref/sharded_pool.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "core/hash.h"
#include "core/spec.h"

namespace kvshard::ref {
namespace {

std::string KeyText(const std::pair<int64_t, int64_t>& key) {
  return key.first < 0 ? "None" : StrCat("(", key.first, ", ", key.second, ")");
}

// Copies `count` rows of `width` bytes: row from_row(i) of `from` to row to_row(i) of `to`, a run of rows that follow
// each other on both sides in one copy (a page's slots are such a run in every layout here).
template <typename ToRow, typename FromRow>
void CopyRows(size_t count, int64_t width, uint8_t* to, ToRow to_row, const uint8_t* from, FromRow from_row) {
  for (size_t i = 0; i < count;) {
    const int64_t to_first = to_row(i), from_first = from_row(i);
    size_t run = 1;
    while (i + run < count && to_row(i + run) == to_first + static_cast<int64_t>(run) &&
           from_row(i + run) == from_first + static_cast<int64_t>(run)) {
      ++run;
    }
    std::memcpy(to + to_first * width, from + from_first * width, run * width);
    i += run;
  }
}

// The identity row map: row i.
int64_t Packed(size_t i) { return static_cast<int64_t>(i); }

}  // namespace

uint32_t RowValue(int64_t layer, int64_t loc, int64_t salt, int64_t word) {
  return static_cast<uint32_t>(Mix64(Mix64(Mix64(static_cast<uint64_t>(layer)) ^ static_cast<uint64_t>(loc)) ^
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

std::vector<uint8_t> BufferRowValues(int64_t layer, int64_t buffer, const std::vector<int64_t>& locs, int64_t salt,
                                     int64_t row_bytes) {
  std::vector<uint8_t> rows(locs.size() * row_bytes);
  for (size_t i = 0; i < locs.size(); ++i) {
    for (int64_t j = 0; j < row_bytes; ++j) {
      const uint32_t word = RowValue(layer, locs[i], salt, buffer << 12 | j / 4);
      rows[i * row_bytes + j] = static_cast<uint8_t>(word >> (8 * (j % 4)));
    }
  }
  return rows;
}

BufferRows AllBufferRowValues(int64_t layer, const std::vector<PoolBuffer>& buffers, const std::vector<int64_t>& locs,
                              int64_t salt) {
  BufferRows rows;
  for (size_t b = 0; b < buffers.size(); ++b) {
    rows.push_back(BufferRowValues(layer, static_cast<int64_t>(b), locs, salt, buffers[b].row_bytes));
  }
  return rows;
}

std::vector<PoolBuffer> BuffersOf(const ShardedPoolConfig& c) {
  if (!c.buffers.empty()) return c.buffers;
  return {{"kv", 4 * c.row_words}};
}

std::vector<PoolBuffer> MhaBuffers(int64_t k_row_bytes, int64_t v_row_bytes) {
  return {{"k", k_row_bytes}, {"v", v_row_bytes}};
}

std::vector<PoolBuffer> MlaBuffers(int64_t kv_row_bytes) { return {{"kv", kv_row_bytes}}; }

Status ValidatePoolBuffers(const std::vector<PoolBuffer>& buffers, const std::string& where) {
  if (buffers.empty() || static_cast<int64_t>(buffers.size()) > kMaxPoolBuffers) {
    return InvalidArgument(where, "buffers: must hold 1 to ", kMaxPoolBuffers, " buffers, got ", buffers.size());
  }
  std::set<std::string> names;
  for (size_t b = 0; b < buffers.size(); ++b) {
    if (buffers[b].name.empty()) return InvalidArgument(where, "buffers[", b, "].name: must not be empty");
    if (!names.insert(buffers[b].name).second) {
      return InvalidArgument(where, "buffers[", b, "].name: duplicate buffer ", QuoteInput(buffers[b].name));
    }
    if (buffers[b].row_bytes < 1 || buffers[b].row_bytes > kMaxPoolRowBytes) {
      return InvalidArgument(where, "buffers[", b, "].row_bytes: must be in [1, ", kMaxPoolRowBytes, "], got ",
                             buffers[b].row_bytes);
    }
  }
  return Status::Ok();
}

namespace {

int64_t RowBytesSum(const std::vector<PoolBuffer>& buffers) {
  int64_t sum = 0;
  for (const PoolBuffer& b : buffers) sum += b.row_bytes;
  return sum;
}

// Checks that `rows` holds n rows of every buffer.
Status CheckBufferRows(const std::vector<PoolBuffer>& buffers, const BufferRows& rows, size_t n) {
  if (rows.size() != buffers.size()) {
    return InvalidArgument("rows: must hold one row list per buffer (", buffers.size(), "), got ", rows.size());
  }
  for (size_t b = 0; b < buffers.size(); ++b) {
    if (rows[b].size() != n * buffers[b].row_bytes) {
      return InvalidArgument("rows[", b, "]: must hold locs.size() * row_bytes = ", n * buffers[b].row_bytes,
                             " bytes (buffer ", QuoteInput(buffers[b].name), "), got ", rows[b].size());
    }
  }
  return Status::Ok();
}

std::vector<uint8_t> WordsToBytes(const std::vector<uint32_t>& words) {
  std::vector<uint8_t> bytes(words.size() * 4);
  for (size_t i = 0; i < words.size(); ++i) {
    for (int k = 0; k < 4; ++k) bytes[i * 4 + k] = static_cast<uint8_t>(words[i] >> (8 * k));
  }
  return bytes;
}

std::vector<uint32_t> BytesToWords(const std::vector<uint8_t>& bytes) {
  std::vector<uint32_t> words(bytes.size() / 4, 0);
  for (size_t i = 0; i < words.size(); ++i) {
    for (int k = 0; k < 4; ++k) words[i] |= static_cast<uint32_t>(bytes[i * 4 + k]) << (8 * k);
  }
  return words;
}

}  // namespace

StatusOr<ShardedPool> ShardedPool::Create(const ShardedPoolConfig& c) {
  KVSHARD_RETURN_IF_ERROR(CanCreate(c));
  return ShardedPool(c);
}

Status ShardedPool::CanCreate(const ShardedPoolConfig& c) {
  ExtendBatch geometry{c.shard_size, c.page_size, c.pages_per_rank, c.max_prefix_tokens, c.chunk_tokens, {}};
  KVSHARD_RETURN_IF_ERROR(ValidateExtendBatch(geometry));
  if (c.num_layers < 1 || c.num_layers > 4096) return InvalidArgument("num_layers: must be in [1, 4096]");
  if (c.buffers.empty() && (c.row_words < 1 || c.row_words > 4096)) {
    return InvalidArgument("row_words: must be in [1, 4096]");
  }
  const std::vector<PoolBuffer> buffers = BuffersOf(c);
  KVSHARD_RETURN_IF_ERROR(ValidatePoolBuffers(buffers, ""));
  const double bytes = 1.0 * RowBytesSum(buffers) * c.shard_size *
                       (static_cast<double>(c.num_layers) * (c.pages_per_rank + 1) * c.page_size +
                        2.0 * (c.max_prefix_tokens + c.chunk_tokens + c.page_size));
  if (bytes > 1e9) return InvalidArgument("num_layers: the simulated pools would need ", bytes, " bytes (> 1 GB)");
  return Status::Ok();
}

ShardedPool::ShardedPool(const ShardedPoolConfig& c)
    : config_(c),
      buffers_(BuffersOf(c)),
      rows_per_rank_((c.pages_per_rank + 1) * c.page_size),
      scratch_rows_(c.max_prefix_tokens + c.chunk_tokens + c.page_size),
      keys_(c.shard_size, std::vector<std::pair<int64_t, int64_t>>(2, {-1, -1})),
      write_plan_(c.shard_size) {
  pools_.resize(c.shard_size);
  slots_.resize(c.shard_size);
  for (int64_t r = 0; r < c.shard_size; ++r) {
    slots_[r].resize(2);
    for (const PoolBuffer& b : buffers_) {
      pools_[r].emplace_back(c.num_layers * rows_per_rank_ * b.row_bytes);
      for (auto& slot : slots_[r]) slot.emplace_back(scratch_rows_ * b.row_bytes);
    }
  }
}

Status ShardedPool::BeginShardExtend(const std::vector<ExtendRequest>& requests) {
  ExtendBatch batch{config_.shard_size,        config_.page_size,    config_.pages_per_rank,
                    config_.max_prefix_tokens, config_.chunk_tokens, requests};
  GatherPlan next;
  KVSHARD_RETURN_IF_ERROR(planner_.Build(batch, &next));
  plan_ = std::move(next);
  page_pos_.Update(plan_);
  ++epoch_;
  active_ = true;
  translate_cache_.clear();
  if (plan_.block_pages > 0) Prefetch(0);
  return Status::Ok();
}

void ShardedPool::Prefetch(int64_t layer) {
  if (layer >= config_.num_layers) return;
  const int64_t n = config_.shard_size, s = layer % 2;
  const std::pair<int64_t, int64_t> key{layer, epoch_};
  if (keys_[0][s] == key) return;  // mirrored: every rank holds the same key
  const int64_t block_rows = plan_.block_pages * config_.page_size;
  for (size_t b = 0; b < buffers_.size(); ++b) {  // _gather_pairs: every (pool buffer, scratch tensor) pair
    const int64_t w = buffers_[b].row_bytes;
    // Each rank packs its send block in place: scratch[r*block : (r+1)*block] = pool[send_rows].
    for (int64_t r = 0; r < n; ++r) {
      const uint8_t* pool = pools_[r][b].data() + layer * rows_per_rank_ * w;
      uint8_t* send = slots_[r][s][b].data() + r * block_rows * w;
      const std::vector<int64_t>& rows = plan_.ranks[r].send_rows;
      for (int64_t i = 0; i < block_rows; ++i) std::memcpy(send + i * w, pool + rows[i] * w, w);
    }
    // In-place regular all-gather: every rank receives every other rank's block at its block offset.
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t q = 0; q < n; ++q) {
        if (q == r) continue;
        std::memcpy(slots_[r][s][b].data() + q * block_rows * w, slots_[q][s][b].data() + q * block_rows * w,
                    block_rows * w);
      }
    }
    ++pair_gathers_;
  }
  for (int64_t r = 0; r < n; ++r) keys_[r][s] = key;
  ++gathers_;
}

const std::vector<int64_t>& ShardedPool::TranslateCached(const std::vector<int64_t>& locs) {
  auto it = translate_cache_.find(locs);
  if (it != translate_cache_.end()) return it->second;
  std::vector<int64_t> rows(locs.size());
  const int64_t ps = config_.page_size;
  const std::vector<int64_t>& page_pos = page_pos_.pos();
  for (size_t i = 0; i < locs.size(); ++i) rows[i] = page_pos[locs[i] / ps] * ps + locs[i] % ps;
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

Status ShardedPool::CheckOneWordBuffer(const char* what) const {
  if (buffers_.size() != 1 || buffers_[0].row_bytes % 4 != 0) {
    return InvalidArgument("rows: ", what, " of words needs one buffer of whole words; this pool has ", buffers_.size(),
                           " buffers (use the per-buffer form)");
  }
  return Status::Ok();
}

Status ShardedPool::Write(int64_t layer, const std::vector<int64_t>& locs, const std::vector<uint32_t>& rows) {
  KVSHARD_RETURN_IF_ERROR(CheckOneWordBuffer("a write"));
  KVSHARD_RETURN_IF_ERROR(CheckLayerAndLocs(layer, locs));
  const int64_t w = buffers_[0].row_bytes / 4;
  if (rows.size() != locs.size() * w) {
    return InvalidArgument("rows: must hold locs.size() * row_words = ", locs.size() * w, " words, got ", rows.size());
  }
  return WriteBuffers(layer, locs, {WordsToBytes(rows)});
}

Status ShardedPool::WriteBuffers(int64_t layer, const std::vector<int64_t>& locs, const BufferRows& rows) {
  KVSHARD_RETURN_IF_ERROR(CheckLayerAndLocs(layer, locs));
  KVSHARD_RETURN_IF_ERROR(CheckBufferRows(buffers_, rows, locs.size()));
  const int64_t n = config_.shard_size, ps = config_.page_size;
  if (active_) {  // stage the full chunk into this layer's slot on every rank, every buffer
    const std::vector<int64_t>& dst = TranslateCached(locs);
    for (int64_t r = 0; r < n; ++r) {
      for (size_t b = 0; b < buffers_.size(); ++b) {
        const int64_t w = buffers_[b].row_bytes;
        CopyRows(
            locs.size(), w, slots_[r][layer % 2][b].data(), [&](size_t i) { return dst[i]; }, rows[b].data(), Packed);
      }
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
    for (size_t b = 0; b < buffers_.size(); ++b) {
      const int64_t w = buffers_[b].row_bytes;
      const auto& plan = write_plan_[r];  // (index in locs, local row) of each of the rank's slots
      CopyRows(
          plan.size(), w, pools_[r][b].data() + layer * rows_per_rank_ * w, [&](size_t i) { return plan[i].second; },
          rows[b].data(), [&](size_t i) { return plan[i].first; });
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<BufferRows>> ShardedPool::ReadBuffers(int64_t layer, const std::vector<int64_t>& locs) {
  if (!active_) {
    return FailedPrecondition(
        "sharded pool read outside an active sharded extend batch "
        "(begin_shard_extend not called?)");
  }
  KVSHARD_RETURN_IF_ERROR(CheckLayerAndLocs(layer, locs));
  const int64_t n = config_.shard_size, s = layer % 2;
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
  std::vector<BufferRows> out(n);
  for (int64_t r = 0; r < n; ++r) {
    for (size_t b = 0; b < buffers_.size(); ++b) {
      const int64_t w = buffers_[b].row_bytes;
      std::vector<uint8_t> rows(locs.size() * w);
      CopyRows(locs.size(), w, rows.data(), Packed, slots_[r][s][b].data(), [&](size_t i) { return src[i]; });
      out[r].push_back(std::move(rows));
    }
  }
  return out;
}

StatusOr<std::vector<std::vector<uint32_t>>> ShardedPool::Read(int64_t layer, const std::vector<int64_t>& locs) {
  KVSHARD_RETURN_IF_ERROR(CheckOneWordBuffer("a read"));
  KVSHARD_ASSIGN_OR_RETURN(std::vector<BufferRows> got, ReadBuffers(layer, locs));
  std::vector<std::vector<uint32_t>> out;
  for (const BufferRows& rank : got) out.push_back(BytesToWords(rank[0]));
  return out;
}

Status ShardedPool::WritePrefixValid() const { return FailedPrecondition(kPrefixValidUnsupported); }

std::vector<uint8_t> ShardedPool::LocalRowBytes(int64_t rank, int64_t layer, int64_t buffer, int64_t local_row) const {
  const int64_t w = buffers_[buffer].row_bytes;
  const uint8_t* p = pools_[rank][buffer].data() + (layer * rows_per_rank_ + local_row) * w;
  return std::vector<uint8_t>(p, p + w);
}

std::vector<uint32_t> ShardedPool::LocalRow(int64_t rank, int64_t layer, int64_t local_row) const {
  return BytesToWords(LocalRowBytes(rank, layer, 0, local_row));
}

StatusOr<UnshardedPool> UnshardedPool::Create(const ShardedPoolConfig& c) {
  KVSHARD_RETURN_IF_ERROR(CanCreate(c));
  return UnshardedPool(c.shard_size * (c.pages_per_rank + 1) * c.page_size, c.num_layers, BuffersOf(c));
}

Status UnshardedPool::CanCreate(const ShardedPoolConfig& c) {
  KVSHARD_RETURN_IF_ERROR(ValidatePlacementSpec({c.shard_size, c.page_size}));
  const std::vector<PoolBuffer> buffers = BuffersOf(c);
  if (c.buffers.empty() && (c.row_words < 1 || c.row_words > 4096)) {
    return InvalidArgument("row_words: must be in [1, 4096]");
  }
  KVSHARD_RETURN_IF_ERROR(ValidatePoolBuffers(buffers, ""));
  const double bytes =
      static_cast<double>(c.shard_size) * (c.pages_per_rank + 1) * c.page_size * c.num_layers * RowBytesSum(buffers);
  if (c.pages_per_rank < 0 || c.num_layers < 1 || bytes > 1e9) {
    return InvalidArgument("pages_per_rank: baseline pool geometry out of range");
  }
  return Status::Ok();
}

UnshardedPool::UnshardedPool(int64_t slots, int64_t layers, std::vector<PoolBuffer> buffers)
    : slots_(slots), layers_(layers), buffers_(std::move(buffers)) {
  for (const PoolBuffer& b : buffers_) data_.emplace_back(slots * layers * b.row_bytes);
}

Status UnshardedPool::CheckLayerAndLocs(int64_t layer, const std::vector<int64_t>& locs) const {
  if (layer < 0 || layer >= layers_) return InvalidArgument("layer: must be in [0, ", layers_, "), got ", layer);
  for (size_t i = 0; i < locs.size(); ++i) {
    if (locs[i] < 0 || locs[i] >= slots_) return InvalidArgument("locs[", i, "]: out of range, got ", locs[i]);
  }
  return Status::Ok();
}

Status UnshardedPool::WriteBuffers(int64_t layer, const std::vector<int64_t>& locs, const BufferRows& rows) {
  KVSHARD_RETURN_IF_ERROR(CheckLayerAndLocs(layer, locs));
  KVSHARD_RETURN_IF_ERROR(CheckBufferRows(buffers_, rows, locs.size()));
  for (size_t b = 0; b < buffers_.size(); ++b) {
    const int64_t w = buffers_[b].row_bytes;
    CopyRows(
        locs.size(), w, data_[b].data(), [&](size_t i) { return layer * slots_ + locs[i]; }, rows[b].data(), Packed);
  }
  return Status::Ok();
}

StatusOr<BufferRows> UnshardedPool::ReadBuffers(int64_t layer, const std::vector<int64_t>& locs) const {
  KVSHARD_RETURN_IF_ERROR(CheckLayerAndLocs(layer, locs));
  BufferRows out;
  for (size_t b = 0; b < buffers_.size(); ++b) {
    const int64_t w = buffers_[b].row_bytes;
    std::vector<uint8_t> rows(locs.size() * w);
    CopyRows(locs.size(), w, rows.data(), Packed, data_[b].data(), [&](size_t i) { return layer * slots_ + locs[i]; });
    out.push_back(std::move(rows));
  }
  return out;
}

Status UnshardedPool::Write(int64_t layer, const std::vector<int64_t>& locs, const std::vector<uint32_t>& rows) {
  if (buffers_.size() != 1 || buffers_[0].row_bytes % 4 != 0) {
    return InvalidArgument("rows: a write of words needs one buffer of whole words");
  }
  if (rows.size() != locs.size() * (buffers_[0].row_bytes / 4)) {
    return InvalidArgument("rows: must hold locs.size() * row_words words");
  }
  return WriteBuffers(layer, locs, {WordsToBytes(rows)});
}

StatusOr<std::vector<uint32_t>> UnshardedPool::Read(int64_t layer, const std::vector<int64_t>& locs) const {
  if (buffers_.size() != 1 || buffers_[0].row_bytes % 4 != 0) {
    return InvalidArgument("rows: a read of words needs one buffer of whole words");
  }
  KVSHARD_ASSIGN_OR_RETURN(BufferRows rows, ReadBuffers(layer, locs));
  return BytesToWords(rows[0]);
}

}  // namespace kvshard::ref
