// Seeded synthetic traces for `kvshard gen`: a stream of allocator batches (new chains, extensions of live ones
// and, with the radix cache, requests on documents whose cached prefixes they match), each committed batch's
// sharded-pool pipeline (begin_shard_extend, per layer set_kv_buffer and get_key_buffer, end_shard_extend), its
// gather plan, CP split plan and rerange, the cache's inserts, unlocks and evictions, frees and free groups, with
// expect filled by the reference. Byte-identical output for the same options (the generator's own PRNG, no std
// distributions).
#ifndef KVSHARD_REPLAY_TRACE_GEN_H_
#define KVSHARD_REPLAY_TRACE_GEN_H_

#include <cstdint>
#include <iosfwd>

#include "core/status.h"

namespace kvshard::replay {

// What to generate.
struct TraceGenOptions {
  uint64_t seed = 1;
  int64_t records = 1000;        // records after the header
  int64_t shard_size = 4;        // N (allocator and gather plans)
  int64_t page_size = 16;        // ps
  int64_t pages_per_rank = 256;  // allocatable pages per rank
  bool need_sort = false;
  int64_t cp_size = 4;          // split and rerange records
  int64_t batch_size = 8;       // most requests per alloc batch
  int64_t max_len = 512;        // most tokens of a new request (and of an extension)
  int64_t share_percent = 40;   // chance that a request extends a live chain or revisits a recent document
  bool edge_heavy = false;      // lengths at page edges, one-request batches, tokens < cp, capacity at the bound
  int64_t num_layers = 2;       // pipeline layers per committed batch; 0: no pipeline records and no header "pool"
  int64_t row_words = 4;        // 32-bit words per KV row of the header's pool
  bool radix = true;            // about half the requests are document requests through the radix cache
  bool cp_records = false;      // per committed batch also page_owners, cp_direct_write, cp_seq_idx, can_cp_split,
                                // cp_local_pair records (replay/trace_gen_cp.h)
  bool allocator_only = false;  // only alloc, free and free_group records (needs num_layers 0, no radix, no cp_records)
};

// Validates the options (names the flag in kebab-case spelling, e.g. "--batch-size").
Status ValidateTraceGenOptions(const TraceGenOptions& options);

// The header's pool scratch capacities: large enough for every batch the generator can make with `options`
// (a request's new pages <= ceil(max_len / ps), a document prefix < max_len tokens, chain extensions hold
// disjoint pages), multiples of N*ps and ps.
struct ScratchBound {
  int64_t max_prefix_tokens = 0;
  int64_t chunk_tokens = 0;
};
ScratchBound TraceGenScratchBound(const TraceGenOptions& options);

// Writes the trace (header + options.records records) to `out`.
Status GenerateTrace(const TraceGenOptions& options, std::ostream& out);

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_TRACE_GEN_H_
