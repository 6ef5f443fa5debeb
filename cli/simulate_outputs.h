// kvshard simulate's output files: --timeline FILE (trace-event JSON), --csv DIR (CSV tables) and --plots DIR
// (SVG charts), from the run's SimRecord; the flags, the checks done before the run, and the writing.
#ifndef KVSHARD_CLI_SIMULATE_OUTPUTS_H_
#define KVSHARD_CLI_SIMULATE_OUTPUTS_H_

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "cli/output_file.h"
#include "core/status.h"
#include "sim/plots.h"
#include "sim/record.h"

namespace kvshard::cli {

// Adds --timeline, --csv and --plots to the simulate command's flags.
void DeclareSimulateOutputFlags(po::options_description& flags);

// Every file simulate reads and writes, checked before anything is opened (CheckOutputPaths): --workload and
// --calibration against --timeline, --emit-trace, the --csv files (the sweep's FILE, or requests.csv, batches.csv
// and rank_pages.csv in DIR) and --plots DIR's charts. Returns the flag that writes standard output ("-"), or "".
StatusOr<std::string> CheckSimulatePaths(const Flags& flags);

// The output files one run writes.
class SimulateOutputs {
 public:
  // Checks the flags before the run (so a bad path fails at once): creates the --csv and --plots directories
  // when missing and opens the --timeline file (written beside its target, kept only by Write; "-" is
  // `standard_output`); errors name the flag (exit 2).
  static StatusOr<SimulateOutputs> Prepare(const Flags& flags, std::ostream& standard_output);

  // True when any output was asked for (the run must then record).
  bool any() const { return timeline_ != nullptr || !csv_dir_.empty() || !plots_dir_.empty(); }
  // Writes every requested output of `record`; each file appears whole or not at all.
  Status Write(const sim::SimRecord& record);

 private:
  std::string csv_dir_, plots_dir_;
  std::unique_ptr<OutputFile> timeline_;
  std::ostream* standard_output_ = nullptr;
};

// Writes `plots` into --plots DIR (created when missing); errors name --plots and the file (exit 2).
Status WritePlots(const std::string& dir, const std::vector<sim::Plot>& plots);

// The files --csv DIR receives.
const std::vector<std::string>& CsvTableFiles();

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_SIMULATE_OUTPUTS_H_
