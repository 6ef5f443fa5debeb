// The rows of `kvshard simulate --sweep` as users read them: a fixed-width table, one JSON object, a CSV.
// Every printer works from the rows' JSON, so rows gathered from MPI ranks print exactly as local ones.
#ifndef KVSHARD_CLI_SIM_SWEEP_OUTPUT_H_
#define KVSHARD_CLI_SIM_SWEEP_OUTPUT_H_

#include <iosfwd>
#include <string>
#include <vector>

#include "core/json.h"
#include "sim/plots.h"

namespace kvshard::cli {

// One table line per row: the swept values (`keys`, flag names), the main figures, and ok / violation / error.
void PrintSweepTable(const std::vector<std::string>& keys, const std::vector<Json>& rows, std::ostream& out);

// A CSV of the rows: index, the swept values, then every figure flattened ("pages_in_use.max"), then error and
// exit_code; RFC 4180 quoting.
void WriteSweepCsv(const std::vector<std::string>& keys, const std::vector<Json>& rows, std::ostream& out);

// The sweep comparison charts (--sweep with --plots DIR): sweep_ttft.svg (TTFT p50 and p99) and
// sweep_utilization.svg (the busiest node's utilization, 1 marked), over the last swept flag's values, one line
// per combination of the other swept flags; rows with an error are left out.
std::vector<sim::Plot> SweepPlots(const std::vector<std::string>& keys, const std::vector<Json>& rows);

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_SIM_SWEEP_OUTPUT_H_
