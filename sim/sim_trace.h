// kvshard simulate --emit-trace: the simulator's decisions as a replayable trace (docs/trace-format.md): its
// prefix cache calls as radix records, every alloc_extend try, its frees, and per committed batch the sharded
// pool pipeline, each record's expect the simulator's answer, so `kvshard replay` checks them on the reference
// (or moves and checks the data on a GPU: --backend gpu|diff).
#ifndef KVSHARD_SIM_SIM_TRACE_H_
#define KVSHARD_SIM_SIM_TRACE_H_

#include <cstdint>
#include <iosfwd>

#include "core/json.h"
#include "core/status.h"
#include "core/workload.h"
#include "sim/simulator.h"

namespace kvshard::sim {

// What to emit.
struct SimTraceOptions {
  int64_t max_batches = 0;  // stop after this many committed batches (0: every batch), closing the trace cleanly
  int64_t num_layers = 0;   // pipeline layers per batch; 0: no pipeline records and no header "pool"
  int64_t row_words = 1;    // 32-bit words per KV row of the header's pool
  Json generator = Json::object();  // the header's "generator" object
};

// Replaying the pipeline holds the pool twice (sharded + unsharded) per layer: refused above this many bytes.
inline constexpr int64_t kMaxEmitReplayBytes = int64_t{16} << 30;

// What an emitted trace holds (record counts after the header).
struct SimTraceCounts {
  int64_t records = 0;
  int64_t batches = 0;                      // committed extend batches
  int64_t allocs = 0, deferred_allocs = 0;  // alloc records, and those whose expect is a deferral
  int64_t matches = 0, inserts = 0, declined = 0, duplicate_pages = 0, unlocks = 0;
  int64_t evicts = 0, evicted_pages = 0;  // the simulator's evictions (the closing evict not counted)
  int64_t frees = 0;                      // the simulator's own frees (partial tail pages)
  int64_t pipeline_records = 0;
  int64_t closing_records = 0;                      // frees, unlocks, evict and the final check after the last batch
  bool truncated = false;                           // stopped at max_batches before the simulation ended
  int64_t max_prefix_tokens = 0, chunk_tokens = 0;  // the header's pool scratch capacities (with layers)
};

// Runs the simulation (as Simulate) and writes its trace to `out` as it runs; with layers a first,
// record-free pass sizes the pool's scratch to the emitted batches' largest gather and chunk. *result is the
// simulation's (of the whole workload, whatever max_batches). Errors: the simulation's, an --emit-layers pool
// too large to replay (InvalidArgument naming the flag), a write failure.
StatusOr<SimTraceCounts> SimulateWithTrace(const Workload& workload, const SimConfig& config,
                                           const SimTraceOptions& options, std::ostream& out, SimResult* result,
                                           const SimProgress& progress = nullptr, SimRecord* record = nullptr);

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_SIM_TRACE_H_
