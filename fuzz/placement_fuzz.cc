// Fuzz target: the reference placement (cpu_ref/placement.h) fed (N, ps, rank, locs) decoded from the bytes,
// biased to the limits (kMaxShardSize, kMaxPageSize, kMaxSlot). Oracle: PlaceLocs refuses with a Status or
// maps every loc; an accepted loc round-trips (GlobalLoc(Owner, LocalIndex) == loc), its owner is in [0, N),
// local_mask agrees with the owner and filter_local lists exactly the rank's locs in input order.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/spec.h"
#include "cpu_ref/placement.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvshard;
  fuzz::ByteReader in(data, size);
  PlacementSpec spec;
  spec.shard_size = in.Byte() % 4 ? in.Range(1, 16) : in.Edgy(kMaxShardSize);
  spec.page_size = in.Byte() % 4 ? in.Range(1, 64) : in.Edgy(kMaxPageSize);
  const int64_t rank = in.Byte() % 4 ? in.Range(0, 16) : in.Edgy(spec.shard_size);
  std::vector<int64_t> locs;
  while (!in.empty() && locs.size() < 64) locs.push_back(in.Byte() % 2 ? in.Range(0, 1 << 16) : in.Edgy(kMaxSlot));
  const StatusOr<PlacementResult> result = ref::PlaceLocs(spec, rank, locs);
  if (!result.ok()) {
    FUZZ_ASSERT(result.status().code() == StatusCode::kInvalidArgument, "a refusal is InvalidArgument");
    return 0;
  }
  const StatusOr<ref::Placement> p = ref::Placement::Create(spec);
  FUZZ_ASSERT(p.ok(), "a spec PlaceLocs accepted is refused by Create");
  FUZZ_ASSERT(result->owner.size() == locs.size() && result->local_index.size() == locs.size() &&
                  result->local_mask.size() == locs.size(),
              "one entry per loc");
  std::vector<int64_t> local;
  for (size_t i = 0; i < locs.size(); ++i) {
    const int64_t owner = result->owner[i], row = result->local_index[i];
    FUZZ_ASSERT(owner >= 0 && owner < spec.shard_size, "owner ", owner);
    FUZZ_ASSERT(p->GlobalLoc(owner, row) == locs[i], "loc ", locs[i], " does not round-trip");
    FUZZ_ASSERT(static_cast<bool>(result->local_mask[i]) == (owner == rank), "local_mask of loc ", locs[i]);
    if (owner == rank) local.push_back(row);
  }
  FUZZ_ASSERT(result->filter_local == local, "filter_local is the rank's rows in input order");
  return 0;
}
