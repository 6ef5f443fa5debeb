// kvshard simulate --sweep: parse the axes with simulate's own flag types, run the product's configurations
// (sim/sweep.h: the knob table, the product, the thread pool), under mpirun rank p taking configurations
// i % P == p, and print the rows (rank 0, in the product's order) as a table, JSON or CSV.
#include "cli/sim_sweep.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <ostream>
#include <sstream>
#include <thread>
#include <functional>
#include <utility>

#include "cli/cli_util.h"
#include "cli/memory_limit.h"
#include "cli/output_file.h"
#include "cli/mpi_world.h"
#include "cli/sim_sweep_output.h"
#include "cli/simulate_outputs.h"
#include "sim/model.h"
#include "sim/sweep.h"
#include "core/workload.h"

namespace kvshard::cli {
namespace {

std::string KnobList() {
  std::vector<std::string> keys;
  for (const sim::SweepKnob& k : sim::SweepKnobs()) keys.push_back(k.key);
  return JoinChoices(keys, ", ");
}

}  // namespace

sim::SweepValue FlagSweepValue(const boost::any& v) {
  if (v.type() == typeid(int64_t)) return boost::any_cast<int64_t>(v);
  if (v.type() == typeid(std::string)) return boost::any_cast<std::string>(v);
  return boost::any_cast<double>(v);
}

StatusOr<sim::SimConfig> SimConfigFromFlags(const Flags& flags) {
  sim::SimConfig c;
  // The model first (a preset or a JSON file): the knobs then override what they name (--layers, --kv-bytes,
  // --context-length are 0 unless given, and a 0 leaves the model's value).
  const std::string model = flags.String("model");
  StatusOr<sim::ModelSpec> m = sim::FindModelPreset(model);
  if (!m.ok()) {
    if (model.find('/') == std::string::npos && model.find('.') == std::string::npos) {
      return InvalidArgument("--", m.status().message());
    }
    KVSHARD_ASSIGN_OR_RETURN(const std::string text, flags.ReadText("model", 32));
    std::istringstream in(text);
    m = sim::ReadModelSpec(in);
    if (!m.ok()) return InvalidArgument("--model: ", QuoteInput(model, '\0'), ": ", m.status().message());
  }
  sim::ApplyModel(*m, &c);
  for (const sim::SweepKnob& k : sim::SweepKnobs()) k.set(c, FlagSweepValue(flags.Any(k.key)));
  c.need_sort = flags.Bool("need-sort");
  c.hbm_gib = flags.Double("hbm-gib");
  return c;
}

Status SweepStatus(const std::vector<Json>& rows) {
  const Json* first[4] = {nullptr, nullptr, nullptr, nullptr};
  size_t count[4] = {0, 0, 0, 0};
  for (const Json& row : rows) {
    int code = row.value("exit_code", 0);
    if (code == 0 && row.value("violations", int64_t{0}) > 0) code = 1;
    if (code < 1 || code > 3) continue;
    if (!first[code]) first[code] = &row;
    ++count[code];
  }
  auto where = [&](int code) {
    return StrCat(count[code], " of ", rows.size(), " configurations; first, row ", (*first[code])["index"].dump(),
                  ": ");
  };
  if (first[2]) return InvalidArgument("--sweep: bad input in ", where(2), (*first[2])["error"].get<std::string>());
  if (first[3]) return Internal("--sweep: failed in ", where(3), (*first[3])["error"].get<std::string>());
  if (first[1]) {
    return Mismatch("invariant violated in ", where(1), (*first[1])["first_violation"].get<std::string>());
  }
  return Status::Ok();
}

void DeclareSweepFlags(po::options_description& flags) {
  flags.add_options()("sweep", po::value<std::vector<std::string>>()->value_name("FLAG=V,..."),
                      ("repeatable: run every combination of these values of simulate flags (" + KnobList() +
                       "), one summary row each (docs/simulate.md)")
                          .c_str())("threads", Int(1, 1024),
                                    "with --sweep: configurations run at once (default: the hardware threads, divided "
                                    "among the MPI processes of a host)");
  if (!flags.find_nothrow("csv", false)) {
    flags.add_options()("csv", File(), "with --sweep: also write the rows as CSV to this file");
  }
}

StatusOr<std::vector<SweepAxis>> ParseSweep(const std::vector<std::string>& args, const Flags& flags,
                                            void (*declare)(po::options_description&)) {
  po::options_description table;
  declare(table);
  std::vector<SweepAxis> axes;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("--sweep: ", QuoteInput(arg, '\''), ": want FLAG=V1,V2,... (e.g. shard-size=8,64,1024)");
    }
    SweepAxis axis;
    axis.key = arg.substr(0, eq);
    const sim::SweepKnob* knob = sim::FindSweepKnob(axis.key);
    const po::option_description* option = table.find_nothrow(axis.key, false);
    if (!knob || !option)
      return InvalidArgument("--sweep: unknown flag ", QuoteInput(axis.key, '\''), " (sweepable: ", KnobList(), ")");
    for (const SweepAxis& a : axes) {
      if (a.key == axis.key) return InvalidArgument("--sweep: ", axis.key, " swept twice");
    }
    if (flags.Given(axis.key)) {
      return InvalidArgument("--sweep: ", axis.key, " is also given as --", axis.key,
                             " (sweep it or fix it, not both)");
    }
    const std::string list = arg.substr(eq + 1);
    size_t start = 0;
    while (true) {
      const size_t comma = list.find(',', start);
      axis.texts.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    for (const std::string& text : axis.texts) {
      if (text.empty()) return InvalidArgument("--sweep: ", axis.key, ": empty value in ", QuoteInput(list, '\''));
      boost::any value;
      try {
        option->semantic()->parse(value, {text}, /*utf8=*/false);  // true converts from UTF-8: throws on bad bytes
      } catch (const FlagValueError& e) {
        return InvalidArgument("--sweep: ", axis.key, "=", QuoteInput(text, '\0'), e.detail());
      } catch (const po::error& e) {
        return InvalidArgument("--sweep: ", axis.key, "=", QuoteInput(text, '\0'), ": ", e.what());
      }
      axis.values.push_back(FlagSweepValue(value));
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

Status RunSweep(const Flags& flags, const sim::SimConfig& base, void (*declare)(po::options_description&),
                std::ostream& out, std::ostream& standard_output) {
  KVSHARD_ASSIGN_OR_RETURN(std::vector<SweepAxis> axes, ParseSweep(flags.StringList("sweep"), flags, declare));
  std::vector<sim::SweepAxis> typed;
  std::vector<std::string> keys;
  for (const SweepAxis& a : axes) {
    typed.push_back({a.key, a.values});
    keys.push_back(a.key);
  }
  StatusOr<std::vector<sim::SweepPoint>> configs = sim::SweepConfigs(typed, base);
  if (!configs.ok()) return FlagError(configs.status());
  std::unique_ptr<MpiWorld> world;
  if (MpiWorld::Launched()) {
    if (flags.String("workload") == "-") {
      return InvalidArgument("--workload: under mpirun every process reads the workload: give a file, not -");
    }
    KVSHARD_ASSIGN_OR_RETURN(world, MpiWorld::Init());
  }
  const int rank = world ? world->rank() : 0, size = world ? world->size() : 1;
  std::unique_ptr<OutputFile> csv;  // written beside its target, renamed over it when the rows are in
  const bool want_csv = rank == 0 && flags.Has("csv");

  // Everything that can fail on one process alone goes into its payload, so no rank is left waiting.
  Status local;
  std::vector<Json> rows;
  if (want_csv) {
    StatusOr<std::unique_ptr<OutputFile>> opened = OutputFile::Open("csv", flags.String("csv"), standard_output);
    if (opened.ok()) csv = std::move(*opened);
    local = opened.status();
  }
  Workload workload;
  if (local.ok()) {
    StatusOr<Workload> w = ReadWorkloadFlag(flags);
    if (w.ok()) workload = std::move(*w);
    local = w.status();
  }
  if (local.ok()) {
    std::vector<size_t> mine;
    for (size_t i = rank; i < configs->size(); i += size) mine.push_back(i);
    int threads = static_cast<int>(flags.Has("threads") ? flags.Int("threads")
                                                        : std::max(1u, std::thread::hardware_concurrency()) /
                                                              (world ? MpiWorld::LocalSize() : 1));
    threads = std::max(1, std::min<int>(threads, static_cast<int>(mine.size())));
    std::function<void(size_t)> bar;
    if (!flags.Bool("quiet") && isatty(STDERR_FILENO)) {
      bar = [total = mine.size()](size_t finished) {
        std::fprintf(stderr, "\rsweep: %zu / %zu configurations", finished, total);
        if (finished == total) std::fprintf(stderr, "\n");
      };
    }
    int started = threads;
    rows = sim::RunSweep(workload, *configs, mine, threads, bar, &started);
    if (started < threads) {  // the system refused the rest (memory for their stacks, or processes)
      std::fprintf(stderr, "kvshard: note: --threads: %d of %d threads could be created; the sweep ran on %d\n",
                   started, threads, started);
    }
  }

  if (world) {  // rank 0 collects every rank's rows (or its error) and puts them in the product's order
    Json payload =
        local.ok() ? Json{{"rows", rows}} : Json{{"code", static_cast<int>(local.code())}, {"error", local.message()}};
    KVSHARD_ASSIGN_OR_RETURN(std::vector<std::string> parts, world->GatherToRoot(payload.dump()));
    if (rank != 0) return local;
    rows.assign(configs->size(), Json());
    for (size_t p = 0; p < parts.size(); ++p) {
      const Json part = Json::parse(parts[p], nullptr, /*allow_exceptions=*/false);
      if (part.is_discarded()) return Internal("--sweep: MPI rank ", p, " sent rows that are not JSON");
      if (part.contains("error")) {
        return Status(static_cast<StatusCode>(part["code"].get<int>()),
                      StrCat(part["error"].get<std::string>(), " (MPI rank ", p, ")"));
      }
      for (const Json& row : part["rows"]) rows.at(row["index"].get<size_t>()) = row;
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].is_null()) return Internal("--sweep: no MPI rank sent row ", i);
    }
  } else if (!local.ok()) {
    return local;
  }
  for (Json& row : rows) {  // the simulator's errors name SimConfig fields; the rows speak simulate's flags
    if (row.contains("error")) row["error"] = SpellFlags(row["error"].get<std::string>(), SimFlagNames());
  }

  if (flags.Bool("json")) {
    Json axes_json = Json::object();
    for (const SweepAxis& a : axes) {
      Json values = Json::array();
      for (const sim::SweepValue& v : a.values) values.push_back(sim::SweepValueJson(v));
      axes_json[a.key] = values;
    }
    PrintJson(Json{{"sweep", axes_json}, {"configurations", configs->size()}, {"rows", rows}}, out);
  } else {
    PrintSweepTable(keys, rows, out);
  }
  if (want_csv) {
    WriteSweepCsv(keys, rows, csv->stream());
    KVSHARD_RETURN_IF_ERROR(csv->Commit());
  }
  if (flags.Has("plots")) KVSHARD_RETURN_IF_ERROR(WritePlots(flags.String("plots"), SweepPlots(keys, rows)));
  return SweepStatus(rows);
}

const FlagNames& SimFlagNames() {
  static const auto* names = [] {
    auto* n =
        new FlagNames{{"max_batches", "emit-max-batches"}, {"num_layers", "emit-layers"}, {"emit_trace", "emit-trace"}};
    for (const sim::SweepKnob& k : sim::SweepKnobs()) n->emplace_back(k.field, k.key);
    return n;
  }();
  return *names;
}

}  // namespace kvshard::cli
