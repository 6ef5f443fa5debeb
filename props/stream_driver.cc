// The stream driver: SGLang's scheduler loop reduced to what the pool model needs.
#include "props/stream_driver.h"

#include <algorithm>
#include <utility>

namespace kvshard::props {
ref::ShardedPoolConfig StreamPoolConfig(const StreamConfig& c) {
  const int64_t max_pages = (c.max_len + c.page_size - 1) / c.page_size;
  const int64_t block = c.max_batch * ((max_pages + c.shard_size - 1) / c.shard_size);
  return {c.shard_size,
          c.page_size,
          c.pages_per_rank,
          c.shard_size * c.page_size * block,
          c.page_size * c.max_batch * max_pages,
          c.num_layers,
          c.row_words,
          c.buffers};
}

StatusOr<std::unique_ptr<StreamDriver>> StreamDriver::Create(const StreamConfig& c, replay::PoolDataPath* mirror) {
  if (c.shared.empty()) return InvalidArgument("shared: needs one entry per document, got none");
  KVSHARD_ASSIGN_OR_RETURN(ref::PageInterleaveAllocator allocator,
                           ref::PageInterleaveAllocator::Create(
                               {c.shard_size, c.page_size, c.pages_per_rank, c.need_sort, /*check_last_loc=*/true}));
  KVSHARD_ASSIGN_OR_RETURN(ref::ShardedPool pool, ref::ShardedPool::Create(StreamPoolConfig(c)));
  KVSHARD_ASSIGN_OR_RETURN(ref::UnshardedPool baseline, ref::UnshardedPool::Create(StreamPoolConfig(c)));
  std::unique_ptr<StreamDriver> driver(new StreamDriver(c, std::move(allocator), std::move(pool), std::move(baseline)));
  driver->mirror_ = mirror;
  return driver;
}

StreamDriver::StreamDriver(const StreamConfig& c, ref::PageInterleaveAllocator allocator, ref::ShardedPool pool,
                           ref::UnshardedPool baseline)
    : config_(c),
      allocator_(std::move(allocator)),
      cache_(&allocator_),
      pool_(std::move(pool)),
      baseline_(std::move(baseline)) {}

std::vector<int64_t> StreamDriver::Tokens(int64_t doc, int64_t len) const {
  std::vector<int64_t> t(len);
  for (int64_t i = 0; i < len; ++i) t[i] = i < config_.shared[doc] ? i % 5 : (doc + 1) * 1000003 + i;
  return t;
}

Status StreamDriver::Step(const std::vector<StreamRequest>& reqs) {
  const int64_t ps = config_.page_size;
  std::vector<std::vector<int64_t>> tokens;
  std::vector<ref::RadixCache::Match> matches;
  AllocBatch batch;
  for (const StreamRequest& r : reqs) {
    tokens.push_back(Tokens(r.doc, r.len));
    // Keep at least one token to compute: match on the first len - 1 tokens.
    matches.push_back(cache_.MatchPrefix(std::vector<int64_t>(tokens.back().begin(), tokens.back().end() - 1)));
    const ref::RadixCache::Match& m = matches.back();
    cache_.Lock(m.node);
    stats_.prefix_hits += m.prefix_len > 0;
    batch.prefix_lens.push_back(m.prefix_len);
    batch.seq_lens.push_back(r.len);
    batch.rotation_bases.push_back(m.rotation_base);
    batch.last_locs.push_back(m.prefix_len ? m.pages.back() * ps + ps - 1 : 0);
  }
  auto unlock_all = [&]() -> Status {
    for (const auto& m : matches) KVSHARD_RETURN_IF_ERROR(cache_.Unlock(m.node));
    return Status::Ok();
  };
  ref::ExtendPages out;
  KVSHARD_ASSIGN_OR_RETURN(bool ok, allocator_.AllocExtend(batch, &out));
  if (!ok) {  // evict what the batch needs at most, then retry once
    int64_t need = 0;
    for (size_t i = 0; i < reqs.size(); ++i) need += (batch.seq_lens[i] + ps - 1) / ps - batch.prefix_lens[i] / ps;
    KVSHARD_ASSIGN_OR_RETURN(int64_t evicted, cache_.Evict(need * config_.shard_size));
    stats_.evicted_pages += evicted;
    KVSHARD_ASSIGN_OR_RETURN(ok, allocator_.AllocExtend(batch, &out));
  }
  if (!ok) {
    ++stats_.deferred;
    return unlock_all();
  }
  ++stats_.batches;
  std::vector<ExtendRequest> requests;
  std::vector<int64_t> read_locs;
  for (size_t i = 0; i < reqs.size(); ++i) {
    ExtendRequest r{batch.prefix_lens[i], batch.seq_lens[i], matches[i].pages};
    r.pages.insert(r.pages.end(), out.pages.begin() + out.offsets[i], out.pages.begin() + out.offsets[i + 1]);
    for (int64_t pos = 0; pos < r.seq_len; ++pos) read_locs.push_back(r.pages[pos / ps] * ps + pos % ps);
    requests.push_back(std::move(r));
  }
  if (Status s = pool_.BeginShardExtend(requests); !s.ok()) {
    return Annotate(s, "begin_shard_extend: ");
  }
  const std::vector<int64_t> chunk = ref::ExtendSlots(batch, out, ps);
  const int64_t salt = pool_.epoch();
  if (mirror_) {
    const ref::ShardedPoolConfig pc = StreamPoolConfig(config_);
    ExtendBatch eb{pc.shard_size, pc.page_size, pc.pages_per_rank, pc.max_prefix_tokens, pc.chunk_tokens, requests};
    KVSHARD_ASSIGN_OR_RETURN(GatherPlan plan, mirror_->Begin(eb, chunk));
    if (!(plan == pool_.plan())) return Mismatch(mirror_->Name(), ": gather plan differs from the reference");
  }
  for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
    KVSHARD_RETURN_IF_ERROR(config_.buffers.empty() ? WriteAndReadWords(layer, chunk, read_locs, salt)
                                                    : WriteAndReadBuffers(layer, chunk, read_locs, salt));
    if (mirror_) KVSHARD_RETURN_IF_ERROR(MirrorLayer(layer, chunk, read_locs, salt));
  }
  if (mirror_) KVSHARD_RETURN_IF_ERROR(mirror_->End());
  pool_.EndShardExtend();
  // Finish: cache the full pages (duplicates freed, foreign bases declined), free the partial tail page.
  for (size_t i = 0; i < reqs.size(); ++i) {
    KVSHARD_ASSIGN_OR_RETURN(auto ins, cache_.Insert(tokens[i], requests[i].pages, out.rotation_bases[i]));
    stats_.declined += ins.declined;
    if (reqs[i].len % ps != 0) KVSHARD_RETURN_IF_ERROR(allocator_.Free({requests[i].pages.back() * ps}));
  }
  return unlock_all();
}

Status StreamDriver::WriteAndReadWords(int64_t layer, const std::vector<int64_t>& chunk,
                                       const std::vector<int64_t>& read_locs, int64_t salt) {
  const std::vector<uint32_t> rows = ref::RowValues(layer, chunk, salt, config_.row_words);
  KVSHARD_RETURN_IF_ERROR(pool_.Write(layer, chunk, rows));
  KVSHARD_RETURN_IF_ERROR(baseline_.Write(layer, chunk, rows));
  KVSHARD_ASSIGN_OR_RETURN(auto got, pool_.Read(layer, read_locs));
  KVSHARD_ASSIGN_OR_RETURN(auto want, baseline_.Read(layer, read_locs));
  for (size_t r = 0; r < got.size(); ++r) {
    if (got[r] != want) {
      size_t i = 0;
      while (got[r][i] == want[i]) ++i;
      const size_t row = i / config_.row_words;
      return Mismatch("layer ", layer, " rank ", r, ": sharded read of loc ", read_locs[row],
                      " differs from the unsharded baseline");
    }
  }
  stats_.rows_compared += static_cast<int64_t>(read_locs.size() * got.size());
  return Status::Ok();
}

Status StreamDriver::WriteAndReadBuffers(int64_t layer, const std::vector<int64_t>& chunk,
                                         const std::vector<int64_t>& read_locs, int64_t salt) {
  const ref::BufferRows rows = ref::AllBufferRowValues(layer, config_.buffers, chunk, salt);
  KVSHARD_RETURN_IF_ERROR(pool_.WriteBuffers(layer, chunk, rows));
  KVSHARD_RETURN_IF_ERROR(baseline_.WriteBuffers(layer, chunk, rows));
  KVSHARD_ASSIGN_OR_RETURN(auto got, pool_.ReadBuffers(layer, read_locs));
  KVSHARD_ASSIGN_OR_RETURN(auto want, baseline_.ReadBuffers(layer, read_locs));
  for (size_t r = 0; r < got.size(); ++r) {
    for (size_t b = 0; b < want.size(); ++b) {
      if (got[r][b] == want[b]) continue;
      size_t i = 0;
      while (got[r][b][i] == want[b][i]) ++i;
      const size_t row = i / config_.buffers[b].row_bytes;
      return Mismatch("layer ", layer, " rank ", r, " buffer ", config_.buffers[b].name, ": sharded read of loc ",
                      read_locs[row], " differs from the unsharded baseline");
    }
  }
  stats_.rows_compared += static_cast<int64_t>(read_locs.size() * got.size() * want.size());
  return Status::Ok();
}

Status StreamDriver::MirrorLayer(int64_t layer, const std::vector<int64_t>& chunk,
                                 const std::vector<int64_t>& read_locs, int64_t salt) {
  const std::vector<ref::PoolBuffer> buffers = ref::BuffersOf(StreamPoolConfig(config_));
  KVSHARD_RETURN_IF_ERROR(mirror_->Write(layer, chunk, ref::AllBufferRowValues(layer, buffers, chunk, salt)));
  KVSHARD_ASSIGN_OR_RETURN(auto got, mirror_->Read(layer, read_locs));
  KVSHARD_ASSIGN_OR_RETURN(auto want, pool_.ReadBuffers(layer, read_locs));  // resident: no state change
  if (got.size() != want.size()) return Mismatch(mirror_->Name(), ": ", got.size(), " ranks read, want ", want.size());
  for (size_t r = 0; r < want.size(); ++r) {
    for (size_t b = 0; b < buffers.size(); ++b) {
      if (got[r].size() == want[r].size() && got[r][b] == want[r][b]) continue;
      size_t i = 0;
      while (i < got[r][b].size() && i < want[r][b].size() && got[r][b][i] == want[r][b][i]) ++i;
      const size_t row = i / buffers[b].row_bytes;
      return Mismatch(mirror_->Name(), ": layer ", layer, " rank ", r, " buffer ", buffers[b].name, ": read of loc ",
                      row < read_locs.size() ? read_locs[row] : -1, " byte ", i % buffers[b].row_bytes,
                      " differs from the reference pool");
    }
  }
  stats_.mirror_rows_compared += static_cast<int64_t>(read_locs.size() * want.size() * buffers.size());
  return Status::Ok();
}

Status StreamDriver::CheckInvariants() const {
  KVSHARD_RETURN_IF_ERROR(cache_.CheckInvariants());
  const int64_t n = config_.shard_size;
  std::vector<int> seen(allocator_.num_logical_pages(), 0);
  for (const auto& chain : cache_.Chains()) {
    for (size_t k = 0; k < chain.pages.size(); ++k) {
      if (chain.pages[k] % n != (chain.pages[0] + static_cast<int64_t>(k)) % n) {
        return Mismatch("cached chain starting at page ", chain.pages[0], " (base ", chain.rotation_base,
                        ") is not cyclic at position ", k, " (page ", chain.pages[k], ")");
      }
    }
  }
  int64_t cached = 0;
  for (const auto& chain : cache_.Chains()) {
    for (int64_t p : chain.pages) {
      cached += seen[p] == 0;  // chains share their common prefix nodes
      seen[p] = 1;
    }
  }
  if (cached != cache_.cached_pages()) {
    return Mismatch("cache holds ", cache_.cached_pages(), " pages, chains ", cached);
  }
  for (int64_t c = 0; c < n; ++c) {
    for (const auto& list : {allocator_.free_list(c), allocator_.release_list(c)}) {
      for (int64_t p : list) {
        if (seen[p]++) return Mismatch("page ", p, " is both free and cached, or free twice");
      }
    }
  }
  for (int64_t p = n; p < allocator_.num_logical_pages(); ++p) {
    if (seen[p] != 1) return Mismatch("page ", p, " leaked: neither free nor cached after the step");
  }
  return Status::Ok();
}

}  // namespace kvshard::props
