// kvshard simulate's --emit-trace flags over sim/sim_trace.h: the simulation run with or without its trace.
#ifndef KVSHARD_CLI_SIMULATE_EMIT_H_
#define KVSHARD_CLI_SIMULATE_EMIT_H_

#include <ostream>

#include "cli/flags.h"
#include "core/json.h"
#include "core/status.h"
#include "core/workload.h"
#include "sim/sim_trace.h"
#include "sim/simulator.h"

namespace kvshard::cli {

// kvshard simulate's --emit-trace, --emit-max-batches and --emit-layers (cli/simulate_emit.cc).
void DeclareEmitTraceFlags(po::options_description& flags);

// The simulation for kvshard simulate: sim::Simulate, or with --emit-trace FILE SimulateWithTrace into FILE (a
// directory or an unwritable path is InvalidArgument naming --emit-trace, before anything runs; the trace is written
// beside FILE and renamed over it only when the run succeeded; "-" writes `standard_output`); *emitted then
// describes the trace (its path, records, counts and bytes) for the summary, else stays null. `record` (may be
// null) collects the rows of --timeline, --csv and --plots.
StatusOr<sim::SimResult> SimulateForCli(const Flags& flags, const Workload& workload, const sim::SimConfig& config,
                                        const sim::SimProgress& progress, sim::SimRecord* record, Json* emitted,
                                        std::ostream& standard_output);

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_SIMULATE_EMIT_H_
