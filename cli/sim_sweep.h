// kvshard simulate --sweep: the cartesian product of swept flag values, run in threads (and divided across
// processes under mpirun), one summary row per configuration in the product's order.
#ifndef KVSHARD_CLI_SIM_SWEEP_H_
#define KVSHARD_CLI_SIM_SWEEP_H_

#include <iosfwd>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/flags.h"
#include "core/json.h"
#include "core/status.h"
#include "sim/simulator.h"
#include "sim/sweep.h"

namespace kvshard::cli {

// A value parsed by simulate's flag table (int64_t, double or std::string), as the sweep's typed value.
sim::SweepValue FlagSweepValue(const boost::any& value);

// The simulator's configuration from simulate's flags: --model (a preset or a model file, sim/model.h), then every
// sweepable setting through its knob (sim/sweep.h), so a flag and its --sweep axis set the same field; then
// --need-sort and --hbm-gib. Errors: an unknown preset, an unreadable or bad model file (exit 2).
StatusOr<sim::SimConfig> SimConfigFromFlags(const Flags& flags);

// The simulator's field names (the knobs' SimConfig fields, SimTraceOptions') in simulate's flag spelling.
const FlagNames& SimFlagNames();

// Declares --sweep, --threads and (unless simulate already has it) --csv.
void DeclareSweepFlags(po::options_description& flags);

// One swept flag: its name and values (as typed, and parsed by the flag's own value type).
struct SweepAxis {
  std::string key;
  std::vector<std::string> texts;
  std::vector<sim::SweepValue> values;
};

// Parses the --sweep arguments ("shard-size=8,64,1024", one per axis) against simulate's flag table
// (`declare`): unknown keys, repeated keys, keys also given as flags, malformed lists and values the flag
// rejects are InvalidArgument naming --sweep.
StatusOr<std::vector<SweepAxis>> ParseSweep(const std::vector<std::string>& args, const Flags& flags,
                                            void (*declare)(po::options_description&));

// The sweep's outcome from its rows: InvalidArgument when a row had bad input (exit 2), else Internal when one
// failed in the environment (exit 3), else Mismatch when one violated an invariant (exit 1), else OK; the message
// counts them and quotes the first.
Status SweepStatus(const std::vector<Json>& rows);

// Runs `kvshard simulate --sweep ...`: `base` is the configuration the other flags give, `declare` simulate's
// flag table; the table or JSON goes to `out`, and `--csv -` to `standard_output`. Exit status: 2 when a row had
// bad input, 1 when a row violated an invariant.
Status RunSweep(const Flags& flags, const sim::SimConfig& base, void (*declare)(po::options_description&),
                std::ostream& out, std::ostream& standard_output);

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_SIM_SWEEP_H_
