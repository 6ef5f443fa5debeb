// Sweeps of the simulator: the sweepable settings of SimConfig (one table), the cartesian product of swept values
// (the last axis varies fastest), and the configurations run on a thread pool over one shared read-only workload,
// one result row each. kvshard simulate --sweep parses the values with its flags' types and prints the rows.
#ifndef KVSHARD_SIM_SWEEP_H_
#define KVSHARD_SIM_SWEEP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "core/json.h"
#include "core/status.h"
#include "core/workload.h"
#include "sim/simulator.h"

namespace kvshard::sim {

// A swept value, typed as the setting it sets: an integer, a real or a name.
using SweepValue = std::variant<int64_t, double, std::string>;

// The same value as JSON (a number or a string).
Json SweepValueJson(const SweepValue& value);

// One sweepable setting: its key (simulate's flag name, "shard-size") and how a value sets it.
struct SweepKnob {
  const char* key;    // the setting's name in simulate's flags and --sweep (e.g. "cache-tokens")
  const char* field;  // the SimConfig field it sets, as the simulator's errors name it (e.g. "cache_tokens")
  void (*set)(SimConfig& config, const SweepValue& value);
};

// Every sweepable setting, in simulate --help's order.
const std::vector<SweepKnob>& SweepKnobs();
// The knob of `key`, or null.
const SweepKnob* FindSweepKnob(const std::string& key);

// One swept setting and its values, in the order given.
struct SweepAxis {
  std::string key;
  std::vector<SweepValue> values;
};

// One configuration of the product: the base with the swept values set, and those values by key.
struct SweepPoint {
  SimConfig config;
  Json swept;
};

// The most configurations one sweep may have.
inline constexpr size_t kMaxSweepConfigs = 100000;

// The product of `axes` over `base` (the first axis varies slowest). More than kMaxSweepConfigs, or an unknown key,
// is InvalidArgument "sweep: ...".
StatusOr<std::vector<SweepPoint>> SweepConfigs(const std::vector<SweepAxis>& axes, const SimConfig& base);

// One configuration's row: index, swept values, then ResultJson's keys; or, when it failed, config, error and the
// error's exit code.
Json SweepRowJson(size_t index, const SweepPoint& point, const StatusOr<SimResult>& result);

// Simulates points[mine[k]] for every k on `threads` threads (at least 1); the rows come in the order of `mine`.
// `progress` (may be null) is called, one call at a time, with the configurations finished so far. Threads the
// system cannot create (out of memory or processes) are done without: the work runs on those it could, the
// caller's own at least, and `started` (may be null) gets how many ran. An exception a worker throws (bad_alloc)
// is rethrown on the caller's thread once every worker has joined.
std::vector<Json> RunSweep(const Workload& workload, const std::vector<SweepPoint>& points,
                           const std::vector<size_t>& mine, int threads,
                           const std::function<void(size_t finished)>& progress = nullptr, int* started = nullptr);

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_SWEEP_H_
