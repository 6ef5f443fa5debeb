// kvshard simulate --sweep: parse the axes with simulate's own flag types, run the product's configurations on a
// thread pool over one shared read-only workload, under mpirun rank p taking configurations i % P == p, and
// print the rows (rank 0, in the product's order) as a table, JSON or CSV.
#include "cli/sim_sweep.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <ostream>
#include <thread>
#include <utility>

#include "cli/cli_util.h"
#include "cli/memory_limit.h"
#include "cli/mpi_world.h"
#include "cli/sim_sweep_output.h"
#include "sim/result_json.h"
#include "core/workload.h"

namespace kvshard::cli {
namespace {

constexpr size_t kMaxConfigs = 100000;

// A swept flag and how its parsed value sets the configuration.
struct Knob {
  const char* key;
  void (*set)(sim::SimConfig& c, const boost::any& v);
};

int64_t I(const boost::any& v) { return boost::any_cast<int64_t>(v); }
double D(const boost::any& v) { return boost::any_cast<double>(v); }

const Knob kKnobs[] = {
    {"shard-size", [](sim::SimConfig& c, const boost::any& v) { c.shard_size = I(v); }},
    {"page-size", [](sim::SimConfig& c, const boost::any& v) { c.page_size = I(v); }},
    {"cp-size", [](sim::SimConfig& c, const boost::any& v) { c.cp_size = I(v); }},
    {"cache-tokens", [](sim::SimConfig& c, const boost::any& v) { c.cache_tokens = I(v); }},
    {"chunk-tokens", [](sim::SimConfig& c, const boost::any& v) { c.chunk_tokens = I(v); }},
    {"max-batch-tokens", [](sim::SimConfig& c, const boost::any& v) { c.max_batch_tokens = I(v); }},
    {"max-batch-requests", [](sim::SimConfig& c, const boost::any& v) { c.max_batch_requests = I(v); }},
    {"time-scale", [](sim::SimConfig& c, const boost::any& v) { c.time_scale = D(v); }},
    {"decode-tokens-per-s", [](sim::SimConfig& c, const boost::any& v) { c.decode_tokens_per_s = D(v); }},
    {"kv-bytes", [](sim::SimConfig& c, const boost::any& v) { c.kv_bytes_per_token_layer = I(v); }},
    {"layers", [](sim::SimConfig& c, const boost::any& v) { c.cost.layers = I(v); }},
    {"alloc-mode", [](sim::SimConfig& c, const boost::any& v) {
       c.alloc_mode = boost::any_cast<std::string>(v) == "owners" ? sim::AllocMode::kOwners : sim::AllocMode::kRotated;
     }},
};

const Knob* FindKnob(const std::string& key) {
  for (const Knob& k : kKnobs) {
    if (key == k.key) return &k;
  }
  return nullptr;
}

std::string KnobList() {
  std::vector<std::string> keys;
  for (const Knob& k : kKnobs) keys.push_back(k.key);
  return JoinChoices(keys, ", ");
}

Json AnyJson(const boost::any& v) {
  if (v.type() == typeid(int64_t)) return Json(boost::any_cast<int64_t>(v));
  if (v.type() == typeid(std::string)) return Json(boost::any_cast<std::string>(v));
  return Json(boost::any_cast<double>(v));
}

// One configuration's row: index, swept values, then the single run's --json keys, or its error.
Json RowJson(size_t index, const Json& swept, const sim::SimConfig& c, const StatusOr<sim::SimResult>& r) {
  Json row;
  row["index"] = index;
  row["sweep"] = swept;
  if (r.ok()) {
    const Json single = sim::ResultJson(*r, c);
    for (const auto& [key, value] : single.items()) row[key] = value;
  } else {
    row["config"] = sim::ResultJson(sim::SimResult{}, c)["config"];
    row["error"] = r.status().message();
    row["exit_code"] = ExitCodeFor(r.status());
  }
  return row;
}

// Runs configurations `mine` (indices into `configs`) on `threads` threads; rows in the order of `mine`.
std::vector<Json> RunLocal(const Workload& workload, const std::vector<std::pair<sim::SimConfig, Json>>& configs,
                           const std::vector<size_t>& mine, int threads, bool bar) {
  std::vector<Json> rows(mine.size());
  std::atomic<size_t> next{0}, done{0};
  std::mutex print;
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < mine.size();) {
      const auto& [c, swept] = configs[mine[k]];
      StatusOr<sim::SimResult> r = Internal("simulate: not run");
      try {
        r = sim::Simulate(workload, c);  // no progress callback: the simulator keeps no shared mutable state
      } catch (const std::exception& e) {
        r = Internal("simulate: ", e.what());
      }
      rows[k] = RowJson(mine[k], swept, c, r);
      const size_t finished = done.fetch_add(1) + 1;
      if (bar) {
        std::lock_guard<std::mutex> lock(print);
        std::fprintf(stderr, "\rsweep: %zu / %zu configurations", finished, mine.size());
        if (finished == mine.size()) std::fprintf(stderr, "\n");
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return rows;
}

}  // namespace

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
  flags.add_options()
      ("sweep", po::value<std::vector<std::string>>()->value_name("FLAG=V,..."),
       "repeatable: run every combination of these values of simulate flags (shard-size, page-size, cp-size, "
       "cache-tokens, chunk-tokens, max-batch-tokens, max-batch-requests, time-scale, decode-tokens-per-s, "
       "kv-bytes, layers, alloc-mode), one summary row each (docs/simulate.md)")
      ("threads", Int(1, 1024), "with --sweep: configurations run at once (default: the hardware threads, divided "
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
      return InvalidArgument("--sweep: '", arg, "': want FLAG=V1,V2,... (e.g. shard-size=8,64,1024)");
    }
    SweepAxis axis;
    axis.key = arg.substr(0, eq);
    const Knob* knob = FindKnob(axis.key);
    const po::option_description* option = table.find_nothrow(axis.key, false);
    if (!knob || !option) return InvalidArgument("--sweep: unknown flag '", axis.key, "' (sweepable: ", KnobList(), ")");
    for (const SweepAxis& a : axes) {
      if (a.key == axis.key) return InvalidArgument("--sweep: ", axis.key, " swept twice");
    }
    if (flags.Given(axis.key)) {
      return InvalidArgument("--sweep: ", axis.key, " is also given as --", axis.key, " (sweep it or fix it, not both)");
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
      if (text.empty()) return InvalidArgument("--sweep: ", axis.key, ": empty value in '", list, "'");
      boost::any value;
      try {
        option->semantic()->parse(value, {text}, /*utf8=*/false);  // true converts from UTF-8: throws on bad bytes
      } catch (const FlagValueError& e) {
        return InvalidArgument("--sweep: ", axis.key, "=", text, e.detail());
      } catch (const po::error& e) {
        return InvalidArgument("--sweep: ", axis.key, "=", text, ": ", e.what());
      }
      axis.values.push_back(std::move(value));
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

StatusOr<std::vector<std::pair<sim::SimConfig, Json>>> SweepConfigs(const std::vector<SweepAxis>& axes,
                                                                    const sim::SimConfig& base) {
  size_t total = 1;
  for (const SweepAxis& a : axes) {
    total *= a.values.size();
    if (total > kMaxConfigs) return InvalidArgument("--sweep: more than ", kMaxConfigs, " configurations");
  }
  std::vector<std::pair<sim::SimConfig, Json>> configs;
  configs.reserve(total);
  for (size_t i = 0; i < total; ++i) {
    sim::SimConfig c = base;
    Json swept = Json::object();
    size_t rest = i;
    std::vector<size_t> pick(axes.size());
    for (size_t a = axes.size(); a-- > 0;) {  // the last axis varies fastest
      pick[a] = rest % axes[a].values.size();
      rest /= axes[a].values.size();
    }
    for (size_t a = 0; a < axes.size(); ++a) {
      FindKnob(axes[a].key)->set(c, axes[a].values[pick[a]]);
      swept[axes[a].key] = AnyJson(axes[a].values[pick[a]]);
    }
    configs.emplace_back(std::move(c), std::move(swept));
  }
  return configs;
}

Status RunSweep(const Flags& flags, const sim::SimConfig& base, void (*declare)(po::options_description&),
                std::ostream& out) {
  KVSHARD_ASSIGN_OR_RETURN(std::vector<SweepAxis> axes, ParseSweep(flags.StringList("sweep"), flags, declare));
  KVSHARD_ASSIGN_OR_RETURN(auto configs, SweepConfigs(axes, base));
  std::vector<std::string> keys;
  for (const SweepAxis& a : axes) keys.push_back(a.key);
  KVSHARD_ASSIGN_OR_RETURN(WorkloadFormat format, ParseWorkloadFormat(flags.String("format")));

  std::unique_ptr<MpiWorld> world;
  if (MpiWorld::Launched()) {
    if (flags.String("workload") == "-") {
      return InvalidArgument("--workload: under mpirun every process reads the workload: give a file, not -");
    }
    KVSHARD_ASSIGN_OR_RETURN(world, MpiWorld::Init());
  }
  const int rank = world ? world->rank() : 0, size = world ? world->size() : 1;
  std::ofstream csv;
  const bool want_csv = rank == 0 && flags.Has("csv") && !flags.String("csv").empty();

  // Everything that can fail on one process alone goes into its payload, so no rank is left waiting.
  Status local;
  std::vector<Json> rows;
  if (want_csv) {
    csv.open(flags.String("csv"));
    if (!csv) local = InvalidArgument("--csv: ", flags.String("csv"), ": cannot write file");
  }
  Workload workload;
  if (local.ok()) {
    local = flags.WithInput("workload", [&](std::istream& in) -> Status {
      StatusOr<Workload> w = ReadWorkload(in, format, WorkloadMemoryLimits(MaxMemory(flags)));
      if (!w.ok()) return InvalidArgument("--workload: ", w.status().message());
      workload = std::move(*w);
      return Status::Ok();
    });
  }
  if (local.ok()) {
    std::vector<size_t> mine;
    for (size_t i = rank; i < configs.size(); i += size) mine.push_back(i);
    int threads = static_cast<int>(flags.Has("threads") ? flags.Int("threads")
                                                        : std::max(1u, std::thread::hardware_concurrency()) /
                                                              (world ? MpiWorld::LocalSize() : 1));
    threads = std::max(1, std::min<int>(threads, static_cast<int>(mine.size())));
    const bool bar = !flags.Bool("quiet") && isatty(STDERR_FILENO);
    rows = RunLocal(workload, configs, mine, threads, bar);
  }

  if (world) {  // rank 0 collects every rank's rows (or its error) and puts them in the product's order
    Json payload = local.ok() ? Json{{"rows", rows}}
                              : Json{{"code", static_cast<int>(local.code())}, {"error", local.message()}};
    KVSHARD_ASSIGN_OR_RETURN(std::vector<std::string> parts, world->GatherToRoot(payload.dump()));
    if (rank != 0) return local;
    rows.assign(configs.size(), Json());
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

  if (flags.Bool("json")) {
    Json axes_json = Json::object();
    for (const SweepAxis& a : axes) {
      Json values = Json::array();
      for (const boost::any& v : a.values) values.push_back(AnyJson(v));
      axes_json[a.key] = values;
    }
    PrintJson(Json{{"sweep", axes_json}, {"configurations", configs.size()}, {"rows", rows}}, out);
  } else {
    PrintSweepTable(keys, rows, out);
  }
  if (want_csv) {
    WriteSweepCsv(keys, rows, csv);
    csv.close();
    if (!csv) return InvalidArgument("--csv: ", flags.String("csv"), ": write failed");
  }
  return SweepStatus(rows);
}

}  // namespace kvshard::cli
