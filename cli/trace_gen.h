// Seeded synthetic traces for `kvshard gen`: a stream of allocator batches (new chains and extensions of live
// ones), their gather plans, CP split plans and reranges, frees and free groups, with expect filled by the
// reference. Byte-identical output for the same options (the generator's own PRNG, no std distributions).
#ifndef KVSHARD_CLI_TRACE_GEN_H_
#define KVSHARD_CLI_TRACE_GEN_H_

#include <cstdint>
#include <iosfwd>

#include "core/status.h"

namespace kvshard::cli {

// What to generate.
struct TraceGenOptions {
  uint64_t seed = 1;
  int64_t records = 1000;      // records after the header
  int64_t shard_size = 4;      // N (allocator and gather plans)
  int64_t page_size = 16;      // ps
  int64_t pages_per_rank = 256;  // allocatable pages per rank
  bool need_sort = false;
  int64_t cp_size = 4;         // split and rerange records
  int64_t batch_size = 8;      // most requests per alloc batch
  int64_t max_len = 512;       // most tokens of a new request (and of an extension)
  int64_t share_percent = 40;  // chance that a request extends a live chain (prefix sharing)
  bool edge_heavy = false;     // lengths at page edges, one-request batches, tokens < cp, capacity at the bound
};

// Validates the options (names the flag in kebab-case spelling, e.g. "--batch-size").
Status ValidateTraceGenOptions(const TraceGenOptions& options);

// Writes the trace (header + options.records records) to `out`.
Status GenerateTrace(const TraceGenOptions& options, std::ostream& out);

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_TRACE_GEN_H_
