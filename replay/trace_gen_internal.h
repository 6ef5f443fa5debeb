// The generator behind GenerateTrace (replay/trace_gen.h), declared for its two source files: trace_gen.cc (the
// batches, frees and Emit) and trace_gen_pool.cc (a committed batch's pipeline, gather plan, split and rerange).
// Internal to //replay:trace_gen.
#ifndef KVSHARD_REPLAY_TRACE_GEN_INTERNAL_H_
#define KVSHARD_REPLAY_TRACE_GEN_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/hash.h"
#include "core/json.h"
#include "core/status.h"
#include "core/trace.h"
#include "replay/replayer.h"
#include "replay/trace_gen.h"

namespace kvshard::replay::trace_gen {

// splitmix64: the same stream on every platform (std distributions are implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {  // the finalizer of the state, then the state advances by the golden gamma
    const uint64_t z = Mix64(state_);
    state_ += 0x9e3779b97f4a7c15ULL;
    return z;
  }
  // Uniform in [lo, hi].
  int64_t Uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool Percent(int64_t p) { return Uniform(0, 99) < p; }

 private:
  uint64_t state_;
};

inline int64_t CeilDivide(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A live chain: its tokens, base, pages in position order, and the alloc requests holding them.
struct Chain {
  int64_t len = 0;
  int64_t base = 0;
  std::vector<int64_t> pages;
  std::vector<std::pair<int64_t, int64_t>> holders;  // (request id, pages it still holds), in position order
};

// A document of the radix cache: token i is its root document's for i < shared (a shared system prompt), its own
// after. Documents never change: a request reads a prefix of one.
struct Doc {
  int64_t root = 0;
  int64_t shared = 0;
};

// A document request of the batch being built: its locked match and the pages it extends.
struct DocRequest {
  int64_t index = 0;  // position in the alloc batch
  int64_t doc = 0;
  int64_t len = 0;    // tokens (seq_len)
  int64_t match = 0;  // the locking match's K
  std::vector<int64_t> prefix_pages;
};

// Draws a trace's records from the seeded PRNG and writes each with the reference's answer as its expect.
class Generator {
 public:
  Generator(const TraceGenOptions& o, std::unique_ptr<Replayer> replayer, TraceWriter* writer)
      : o_(o), rng_(o.seed), replayer_(std::move(replayer)), writer_(writer) {}

  // Writes records until the trace has options.records of them.
  Status Run();

 private:
  bool Full() const { return writer_->records() >= o_.records; }

  // Runs `rec` through the reference, attaches its answer as expect (the `keep` keys when given, less the `drop`
  // keys of each "ranks" entry) and writes it. With `narrow`, the reference builds only the `keep` keys. Returns
  // the answer, or null when the reference rejected the record (its expect is then the error). Never called when
  // the trace is full.
  StatusOr<Json> Emit(Json rec, const std::vector<std::string>& keep = {}, const std::vector<std::string>& drop = {},
                      bool narrow = false);

  int64_t PoolPages() const { return o_.shard_size * o_.pages_per_rank; }

  // A request length: uniform, or (edge-heavy) at page and CP edges.
  int64_t Length(int64_t most);

  // The first `len` tokens of document `d` (ids below 2^15, so that lines stay short).
  std::vector<int64_t> Tokens(int64_t d, int64_t len) const;

  // A recent document (share-percent), or a new one that shares a prefix of a recent one's root (half of them).
  int64_t PickDoc();

  // A place record: random locs for a random rank.
  Status Place();

  // Releases the batch's locked matches (a deferred or rejected batch).
  Status UnlockAll(const std::vector<DocRequest>& docs);

  // One serving step: a batch of chain requests (extensions of live chains by share-percent, else new chains)
  // and, with the radix cache, document requests that first match their cached prefix (on len - 1 tokens, with
  // lock). The alloc; when it defers with pages cached, an eviction and one retry. A committed batch runs the
  // pipeline and its gather plan, split and rerange; then each document request inserts its pages into the cache,
  // frees its partial tail page by slots and unlocks its match.
  Status AllocBatch();

  // The committed batch on the sharded pool: begin_shard_extend (the req_to_token pages), per layer the chunk's
  // writes and the whole batch's reads (default locs), end_shard_extend. Expect keeps the small fields (the
  // scratch rows once: they are the same for every layer of an extend).
  Status Pipeline(const Json& requests);

  // The batch's gather_plan record at the capacities it needs (edge-heavy: sometimes one page under, rejected).
  Status GatherPlan(const Json& requests);

  // The batch's split (for one random rank) and rerange records; returns the split's answer (null when rejected
  // or not written).
  StatusOr<Json> SplitAndRerange(const std::vector<int64_t>& extend, const std::vector<int64_t>& prefix);

  // Frees one chain's tail page by slots, or the whole chain by request.
  Status FreeOne();

  // Frees up to three whole chains in one free group.
  Status FreeGroup();

  const TraceGenOptions& o_;
  Rng rng_;
  std::unique_ptr<Replayer> replayer_;
  TraceWriter* writer_;
  int64_t next_request_ = 0, free_share_ = 100, cached_pages_ = 0;
  std::vector<Chain> chains_;
  std::vector<Doc> docs_;
};

}  // namespace kvshard::replay::trace_gen

#endif  // KVSHARD_REPLAY_TRACE_GEN_INTERNAL_H_
