// kvshard simulate --emit-trace: the flags, the output file, and the emitted trace's description for the summary.
#include "cli/simulate_emit.h"

#include <memory>

#include "cli/output_file.h"

#include "sim/result_json.h"

namespace kvshard::cli {

void DeclareEmitTraceFlags(po::options_description& flags) {
  flags.add_options()(
      "emit-trace", po::value<std::string>()->value_name("FILE"),
      "write the simulation as a replayable trace (kvshard replay FILE [--backend gpu|diff]): radix cache, "
      "alloc, free and (with --emit-layers) pipeline records, expect = the simulator's answers")(
      "emit-max-batches", NonNegative()->default_value(0),
      "stop the trace after this many extend batches (0: all), releasing what it holds so it replays clean")(
      "emit-layers", Int(0, 4096)->default_value(0),
      "pipeline layers per batch in the trace (begin_shard_extend, set_kv_buffer, get_key_buffer, "
      "end_shard_extend); 0: none");
}

StatusOr<sim::SimResult> SimulateForCli(const Flags& flags, const Workload& workload, const sim::SimConfig& config,
                                        const sim::SimProgress& progress, sim::SimRecord* record, Json* emitted,
                                        std::ostream& standard_output) {
  if (!flags.Has("emit-trace")) {
    if (flags.Given("emit-max-batches") || flags.Given("emit-layers")) {
      return InvalidArgument(flags.Given("emit-layers") ? "--emit-layers" : "--emit-max-batches",
                             ": needs --emit-trace FILE");
    }
    return sim::Simulate(workload, config, progress, record);
  }
  const std::string path = flags.String("emit-trace");
  KVSHARD_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> file, OutputFile::Open("emit-trace", path, standard_output));
  sim::SimTraceOptions o;
  o.max_batches = flags.Int("emit-max-batches");
  o.num_layers = flags.Int("emit-layers");
  const sim::SimConfig& c = config;
  Json emitted_config = sim::ConfigJson(c);  // the --json "config", and the emitter's own:
  emitted_config["time_scale"] = c.time_scale;
  emitted_config["need_sort"] = c.need_sort;
  o.generator = {{"tool", "kvshard simulate"},
                 {"workload", flags.String("workload")},
                 {"format", WorkloadFormatName(workload.format)},
                 {"config", emitted_config},
                 {"emit_max_batches", o.max_batches},
                 {"emit_layers", o.num_layers}};
  sim::SimResult result;
  KVSHARD_ASSIGN_OR_RETURN(sim::SimTraceCounts n,
                           sim::SimulateWithTrace(workload, config, o, file->stream(), &result, progress, record));
  KVSHARD_RETURN_IF_ERROR(file->Commit());  // a run that failed above leaves no trace file (and an old one as it was)
  *emitted = {{"path", path},
              {"records", n.records},
              {"batches", n.batches},
              {"truncated", n.truncated},
              {"allocs", n.allocs},
              {"deferred_allocs", n.deferred_allocs},
              {"matches", n.matches},
              {"inserts", n.inserts},
              {"evicts", n.evicts},
              {"frees", n.frees},
              {"pipeline_records", n.pipeline_records},
              {"closing_records", n.closing_records},
              {"bytes", file->bytes()}};
  return result;
}

}  // namespace kvshard::cli
