// kvshard simulate --csv: a run's record as CSV tables (requests.csv, batches.csv, rank_pages.csv), columns
// after Vidur's and LLMServingSim's request and batch metrics plus the prefix cache's.
#ifndef KVSHARD_SIM_CSV_TABLES_H_
#define KVSHARD_SIM_CSV_TABLES_H_

#include <ostream>
#include <string>

#include "core/status.h"
#include "sim/record.h"

namespace kvshard::sim {

// The header line (no newline) of each table.
extern const char kRequestsCsvHeader[];
extern const char kBatchesCsvHeader[];

// One row per request, in id (arrival) order; times in seconds of the simulated clock, empty when the event
// never happened.
Status WriteRequestsCsv(const SimRecord& record, std::ostream& out);
// One row per extend batch, in run order.
Status WriteBatchesCsv(const SimRecord& record, std::ostream& out);
// One row per batch: batch_id, end (s), then pages in use by each recorded rank (rank_0 .. rank_{R-1}).
Status WriteRankPagesCsv(const SimRecord& record, std::ostream& out);

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_CSV_TABLES_H_
