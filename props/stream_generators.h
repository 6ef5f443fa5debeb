// RapidCheck generators of request streams for StreamDriver: geometry (incl. the pool's buffers), documents
// sharing prefixes, and steps of requests; shared by the reference and the GPU stream properties.
#ifndef KVSHARD_PROPS_STREAM_GENERATORS_H_
#define KVSHARD_PROPS_STREAM_GENERATORS_H_

#include <cstdint>
#include <vector>

#include <rapidcheck.h>

#include "props/pool_generators.h"
#include "props/stream_driver.h"

namespace kvshard::props {

// A stream geometry of 1..max_docs documents.
inline StreamConfig DrawStreamConfig(int64_t max_docs) {
  StreamConfig c;
  c.shard_size = DrawShardSize();
  c.page_size = *rc::gen::element<int64_t>(1, 1, 2, 3, 4, 8);
  c.pages_per_rank = *rc::gen::inRange<int64_t>(1, 16);  // small pools: exhausted classes, evictions, defers
  c.num_layers = *rc::gen::inRange<int64_t>(1, 5);
  c.row_words = *rc::gen::inRange<int64_t>(1, 3);
  c.buffers = DrawPoolBuffers();
  c.max_batch = *rc::gen::inRange<int64_t>(1, 5);
  c.max_len = *rc::gen::inRange<int64_t>(1, 4 * c.shard_size * c.page_size + 2);
  c.need_sort = *rc::gen::arbitrary<bool>();
  const int64_t docs = *rc::gen::inRange<int64_t>(1, max_docs + 1);
  c.shared.push_back(c.max_len);
  for (int64_t d = 1; d < docs; ++d) c.shared.push_back(*rc::gen::inRange<int64_t>(0, c.max_len + 1));
  return c;
}

inline std::vector<StreamRequest> DrawStep(const StreamConfig& c) {
  std::vector<StreamRequest> step(*rc::gen::inRange<int64_t>(1, c.max_batch + 1));
  for (StreamRequest& r : step) {
    r.doc = *rc::gen::inRange<int64_t>(0, static_cast<int64_t>(c.shared.size()));
    r.len = *rc::gen::inRange<int64_t>(1, c.max_len + 1);
  }
  return step;
}

// Draws at full size (f is re-run while shrinking, so it must capture by value): RapidCheck scales ranges
// with a size that starts at 0, which would make most streams trivial; the edges (N = 1, ps = 1, one
// request, one step) are still drawn by the full-range choices.
template <typename F>
inline auto Full(F f) {
  return *rc::gen::resize(100, rc::gen::exec(f));
}

}  // namespace kvshard::props

#endif  // KVSHARD_PROPS_STREAM_GENERATORS_H_
