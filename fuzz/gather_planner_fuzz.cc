// Fuzz target: the gather planners (cpu_ref/ and cpu_fast/) fed extend batches decoded from the bytes: small
// geometries most of the time, else values at and past the limits (kMaxPoolLogicalPages, 2^48, negatives);
// request pages mostly valid pool pages so the semantic checks (alignment, cyclic owners, capacity, fresh chunk
// pages) are reached. Oracle: fuzz/gather_plan_check.h (ref == fast, every page mapped once, owner-major
// blocks).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/gather_plan.h"
#include "core/spec.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/gather_plan_check.h"

namespace kvshard::fuzz {
namespace {

ExtendBatch Decode(ByteReader& in, std::vector<int64_t>* locs) {
  ExtendBatch b;
  b.shard_size = in.Byte() % 4 ? in.Range(1, 8) : in.Edgy(kMaxShardSize);
  b.page_size = in.Byte() % 4 ? in.Range(1, 16) : in.Edgy(kMaxPageSize);
  const int64_t n = std::clamp<int64_t>(b.shard_size, 1, 8), ps = std::clamp<int64_t>(b.page_size, 1, 16);
  b.pages_per_rank = in.Byte() % 4 ? in.Range(0, 64) : in.Edgy(kMaxPoolLogicalPages);
  b.max_prefix_tokens = in.Byte() % 4 ? in.Range(0, 32) * n * ps : in.Edgy(kMaxSlot);
  b.chunk_tokens = in.Byte() % 4 ? in.Range(0, 64) * ps : in.Edgy(kMaxSlot);
  const int64_t pool_pages = n * (std::clamp<int64_t>(b.pages_per_rank, 0, 64) + 1);
  const int64_t requests = in.Range(0, 6);
  for (int64_t q = 0; q < requests; ++q) {
    ExtendRequest r;
    r.prefix_len = in.Byte() % 4 ? in.Range(0, 8) * ps : in.Edgy(kMaxSlot);
    r.seq_len = in.Byte() % 4 ? ByteReader::SatAdd(r.prefix_len, in.Range(0, 4 * ps)) : in.Edgy(kMaxSlot);
    int64_t pages = r.seq_len > 0 ? PositionPages(std::min(r.seq_len, kMaxSlot), ps) : 0;
    if (in.Byte() % 8 == 0) pages += in.Range(-1, 1);  // one page too few or too many
    pages = std::clamp<int64_t>(pages, 0, 64);
    const uint8_t mode = in.Byte() % 4;  // 0: cyclic from a start page, 1: arbitrary pool pages, 2: edgy, 3: mixed
    const int64_t start = in.Range(n, std::max(n, pool_pages - 1));
    for (int64_t j = 0; j < pages; ++j) {
      if (mode == 0 || (mode == 3 && in.Bool())) {
        r.pages.push_back(start + j);
      } else if (mode == 1 || mode == 3) {
        r.pages.push_back(in.Range(0, pool_pages + 1));
      } else {
        r.pages.push_back(in.Edgy(kMaxPoolLogicalPages));
      }
    }
    b.requests.push_back(std::move(r));
  }
  while (!in.empty() && locs->size() < 16)
    locs->push_back(in.Byte() % 4 ? in.Range(0, pool_pages * ps * 2) : in.Edgy(kMaxSlot));
  return b;
}

}  // namespace
}  // namespace kvshard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvshard::fuzz::ByteReader in(data, size);
  std::vector<int64_t> locs;
  const kvshard::ExtendBatch batch = kvshard::fuzz::Decode(in, &locs);
  kvshard::fuzz::CheckGatherPlan(batch, locs);
  return 0;
}
