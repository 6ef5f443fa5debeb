// kvshard simulate --timeline: a run's batches as Chrome/Perfetto trace-event JSON ({"traceEvents": [...]}),
// one process per rank with host, comm (all-gather) and compute threads, and pages-in-use counters.
#ifndef KVSHARD_SIM_TIMELINE_H_
#define KVSHARD_SIM_TIMELINE_H_

#include <ostream>

#include "core/status.h"
#include "sim/record.h"

namespace kvshard::sim {

// Thread ids of a rank's tracks.
inline constexpr int kHostTid = 0, kCommTid = 1, kComputeTid = 2;

// Writes `record` as trace-event JSON to `out` (docs/simulate.md, "--timeline"): per batch and recorded rank,
// X events batch/plan (host), all-gather (comm), compute/stage/rerange (compute), each a phase's total time
// for the batch laid out on the cost model's critical path, and a "pages in use" counter at the batch's end;
// plus a process pid = N with min/mean/max counters over all N ranks. Timestamps are simulated microseconds.
Status WriteTimeline(const SimRecord& record, std::ostream& out);

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_TIMELINE_H_
