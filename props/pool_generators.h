// RapidCheck generators of sharded-pool inputs: valid extend batches built from cyclic chains that share
// prefixes across requests, reaching the edges (N = 1, ps = 1, partial last pages, one request, empty
// prefixes, empty chunks, exhausted classes).
#ifndef KVSHARD_PROPS_POOL_GENERATORS_H_
#define KVSHARD_PROPS_POOL_GENERATORS_H_

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <rapidcheck.h>

#include "core/gather_plan.h"
#include "cpu_ref/sharded_pool.h"

namespace kvshard::props {

// N in 1..8 (biased to 1, 2, 4, 8).
inline int64_t DrawShardSize() {
  return *rc::gen::weightedOneOf<int64_t>(
      {{3, rc::gen::element<int64_t>(1, 2, 4, 8)}, {2, rc::gen::inRange<int64_t>(1, 9)}});
}

// The per-layer buffers of a pool: empty (the one-buffer word form), MHA K/V of independent widths (equal
// widths too), MLA's one latent, or MLA plus an indexer's K and scale rows; widths in bytes, not always words.
inline std::vector<ref::PoolBuffer> DrawPoolBuffers() {
  const int kind = *rc::gen::inRange(0, 4);
  const auto width = [](int64_t hi) { return *rc::gen::inRange<int64_t>(1, hi + 1); };
  if (kind == 0) return {};
  if (kind == 1) return ref::MhaBuffers(width(24), width(24));
  if (kind == 2) return ref::MlaBuffers(width(40));
  return {{"kv", width(40)}, {"index_k", width(20)}, {"index_k_scale", width(4)}};
}

// ps, mostly small so send rows stay cheap: 1, 2, 3, 4 or 16.
inline int64_t DrawPageSize() { return *rc::gen::element<int64_t>(1, 1, 2, 3, 4, 16); }

// The requests of one valid batch over `pages_per_rank` allocatable local pages per rank, and the capacities they
// need.
struct DrawnRequests {
  std::vector<ExtendRequest> requests;
  int64_t block_pages = 0;  // sum of ceil(K_i / N): the prefix scratch needs N * ps * block_pages rows
  int64_t chunk_pages = 0;  // the chunk scratch needs ps * chunk_pages rows
};

// Cyclic chains (random bases) over shuffled free pages; each of 1..5 requests takes a prefix of a chain
// (shared prefixes across requests, possibly empty) plus 0..3 fresh chunk pages (the last one partial).
inline DrawnRequests DrawRequests(int64_t n, int64_t ps, int64_t pages_per_rank) {
  // Free pages per class, in a random order: chains draw from the front.
  std::vector<std::vector<int64_t>> free(n);
  std::mt19937 rng(*rc::gen::arbitrary<uint32_t>());
  for (int64_t c = 0; c < n; ++c) {
    for (int64_t i = 1; i <= pages_per_rank; ++i) free[c].push_back(i * n + c);
    std::shuffle(free[c].begin(), free[c].end(), rng);
  }
  auto take = [&](int64_t owner, std::vector<int64_t>* out) {
    if (free[owner].empty()) return false;  // class exhausted
    out->push_back(free[owner].back());
    free[owner].pop_back();
    return true;
  };
  const int64_t n_chains = *rc::gen::inRange<int64_t>(1, 4);
  std::vector<std::vector<int64_t>> chains(n_chains);
  std::vector<int64_t> bases(n_chains);
  for (int64_t c = 0; c < n_chains; ++c) {
    bases[c] = *rc::gen::inRange<int64_t>(0, n);
    const int64_t len = *rc::gen::inRange<int64_t>(0, 3 * n + 3);
    for (int64_t k = 0; k < len && take((bases[c] + k) % n, &chains[c]); ++k) {
    }
  }
  DrawnRequests d;
  const int64_t reqs = *rc::gen::inRange<int64_t>(1, 6);
  for (int64_t i = 0; i < reqs; ++i) {
    const int64_t c = *rc::gen::inRange<int64_t>(0, n_chains);
    const int64_t k = *rc::gen::inRange<int64_t>(0, static_cast<int64_t>(chains[c].size()) + 1);
    ExtendRequest r;
    r.pages.assign(chains[c].begin(), chains[c].begin() + k);
    const int64_t want_chunk = *rc::gen::inRange<int64_t>(0, 4);
    for (int64_t j = 0; j < want_chunk && take((bases[c] + k + j) % n, &r.pages); ++j) {
    }
    const int64_t got_chunk = static_cast<int64_t>(r.pages.size()) - k;
    r.prefix_len = k * ps;
    r.seq_len = r.prefix_len + got_chunk * ps - (got_chunk ? *rc::gen::inRange<int64_t>(0, ps) : 0);
    d.block_pages += (k + n - 1) / n;
    d.chunk_pages += got_chunk;
    d.requests.push_back(std::move(r));
  }
  return d;
}

// A valid batch: random geometry, DrawRequests, capacities that fit with random slack.
inline ExtendBatch DrawValidBatch() {
  ExtendBatch b;
  b.shard_size = DrawShardSize();
  b.page_size = DrawPageSize();
  const int64_t n = b.shard_size, ps = b.page_size;
  b.pages_per_rank = *rc::gen::inRange<int64_t>(1, 39);
  DrawnRequests d = DrawRequests(n, ps, b.pages_per_rank);
  b.requests = std::move(d.requests);
  b.max_prefix_tokens = n * ps * (d.block_pages + *rc::gen::inRange<int64_t>(0, 3));
  b.chunk_tokens = ps * (d.chunk_pages + *rc::gen::inRange<int64_t>(0, 3));
  return b;
}

// DrawValidBatch at full size (RapidCheck scales ranges with the size, which starts at 0): for properties
// that need non-trivial batches (prefixes, chunks) without discarding most small cases.
inline ExtendBatch DrawFullSizeBatch() { return *rc::gen::resize(100, rc::gen::exec(&DrawValidBatch)); }

}  // namespace kvshard::props

#endif  // KVSHARD_PROPS_POOL_GENERATORS_H_
