// Sweeps: the knob table over SimConfig, the product of the axes, and the thread pool that runs it.
#include "sim/sweep.h"

#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "sim/result_json.h"

namespace kvshard::sim {
namespace {

int64_t I(const SweepValue& v) { return std::get<int64_t>(v); }
double D(const SweepValue& v) { return std::get<double>(v); }

}  // namespace

Json SweepValueJson(const SweepValue& value) {
  return std::visit([](const auto& v) { return Json(v); }, value);
}

const std::vector<SweepKnob>& SweepKnobs() {
  static const auto* knobs = new std::vector<SweepKnob>{
      {"shard-size", "shard_size", [](SimConfig& c, const SweepValue& v) { c.shard_size = I(v); }},
      {"page-size", "page_size", [](SimConfig& c, const SweepValue& v) { c.page_size = I(v); }},
      {"cp-size", "cp_size", [](SimConfig& c, const SweepValue& v) { c.cp_size = I(v); }},
      {"cache-tokens", "cache_tokens", [](SimConfig& c, const SweepValue& v) { c.cache_tokens = I(v); }},
      {"chunked-prefill-size", "chunked_prefill_size",
       [](SimConfig& c, const SweepValue& v) { c.chunked_prefill_size = I(v); }},
      {"max-prefill-tokens", "max_prefill_tokens",
       [](SimConfig& c, const SweepValue& v) { c.max_prefill_tokens = I(v); }},
      {"max-running-requests", "max_running_requests",
       [](SimConfig& c, const SweepValue& v) { c.max_running_requests = I(v); }},
      {"context-length", "context_length",
       [](SimConfig& c, const SweepValue& v) {
         if (I(v) > 0) c.context_length = I(v);  // 0: the model's
       }},
      {"schedule-policy", "schedule_policy",
       [](SimConfig& c, const SweepValue& v) {
         c.schedule_policy = std::get<std::string>(v) == "lpm" ? SchedulePolicy::kLpm : SchedulePolicy::kFcfs;
       }},
      {"time-scale", "time_scale", [](SimConfig& c, const SweepValue& v) { c.time_scale = D(v); }},
      {"kv-transfer-gbps", "kv_transfer_gbps", [](SimConfig& c, const SweepValue& v) { c.kv_transfer_gbps = D(v); }},
      {"bootstrap-ms", "bootstrap_ms", [](SimConfig& c, const SweepValue& v) { c.bootstrap_ms = D(v); }},
      {"slo-ttft-ms", "slo_ttft_ms", [](SimConfig& c, const SweepValue& v) { c.slo_ttft_ms = D(v); }},
      {"instances", "instances", [](SimConfig& c, const SweepValue& v) { c.instances = I(v); }},
      {"router", "router",
       [](SimConfig& c, const SweepValue& v) {
         const std::string& name = std::get<std::string>(v);
         c.router = name == "least-loaded"      ? Router::kLeastLoaded
                    : name == "prefix-affinity" ? Router::kPrefixAffinity
                                                : Router::kRoundRobin;
       }},
      {"kv-bytes", "kv_bytes_per_token_layer",
       [](SimConfig& c, const SweepValue& v) {
         if (I(v) > 0) c.kv_bytes_per_token_layer = I(v);  // 0: the model's
       }},
      {"layers", "cost.layers",
       [](SimConfig& c, const SweepValue& v) {
         if (I(v) > 0) c.cost.layers = I(v);  // 0: the model's
       }},
      {"alloc-mode", "alloc_mode",
       [](SimConfig& c, const SweepValue& v) {
         c.alloc_mode = std::get<std::string>(v) == "owners" ? AllocMode::kOwners : AllocMode::kRotated;
       }},
  };
  return *knobs;
}

const SweepKnob* FindSweepKnob(const std::string& key) {
  for (const SweepKnob& k : SweepKnobs()) {
    if (key == k.key) return &k;
  }
  return nullptr;
}

StatusOr<std::vector<SweepPoint>> SweepConfigs(const std::vector<SweepAxis>& axes, const SimConfig& base) {
  size_t total = 1;
  std::vector<const SweepKnob*> knobs;
  for (const SweepAxis& a : axes) {
    knobs.push_back(FindSweepKnob(a.key));
    if (!knobs.back()) return InvalidArgument("sweep: unknown setting '", a.key, "'");
    total *= a.values.size();
    if (total > kMaxSweepConfigs) return InvalidArgument("sweep: more than ", kMaxSweepConfigs, " configurations");
  }
  std::vector<SweepPoint> points;
  points.reserve(total);
  for (size_t i = 0; i < total; ++i) {
    SweepPoint p{base, Json::object()};
    size_t rest = i;
    std::vector<size_t> pick(axes.size());
    for (size_t a = axes.size(); a-- > 0;) {  // the last axis varies fastest
      pick[a] = rest % axes[a].values.size();
      rest /= axes[a].values.size();
    }
    for (size_t a = 0; a < axes.size(); ++a) {
      knobs[a]->set(p.config, axes[a].values[pick[a]]);
      p.swept[axes[a].key] = SweepValueJson(axes[a].values[pick[a]]);
    }
    points.push_back(std::move(p));
  }
  return points;
}

Json SweepRowJson(size_t index, const SweepPoint& point, const StatusOr<SimResult>& result) {
  Json row;
  row["index"] = index;
  row["sweep"] = point.swept;
  if (result.ok()) {
    const Json single = ResultJson(*result, point.config);
    for (const auto& [key, value] : single.items()) row[key] = value;
  } else {
    row["config"] = ResultJson(SimResult{}, point.config)["config"];
    row["error"] = result.status().message();
    row["exit_code"] = ExitCodeFor(result.status());
  }
  return row;
}

namespace {

// A worker's loop: takes the next configuration until none is left (RunSweep).
void Work(std::vector<Json>& rows, std::atomic<size_t>& next, std::atomic<size_t>& done, std::mutex& report,
          const std::vector<SweepPoint>& points, const std::vector<size_t>& mine, const Workload& workload,
          const std::function<void(size_t finished)>& progress) {
  for (size_t k; (k = next.fetch_add(1)) < mine.size();) {
    const SweepPoint& p = points[mine[k]];
    StatusOr<SimResult> r = Internal("simulate: not run");
    try {
      r = Simulate(workload, p.config);  // no progress callback: the simulator keeps no shared mutable state
    } catch (const std::exception& e) {
      r = Internal("simulate: ", e.what());
    }
    rows[k] = SweepRowJson(mine[k], p, r);
    const size_t finished = done.fetch_add(1) + 1;
    if (progress) {
      std::lock_guard<std::mutex> lock(report);
      progress(finished);
    }
  }
}

}  // namespace

std::vector<Json> RunSweep(const Workload& workload, const std::vector<SweepPoint>& points,
                           const std::vector<size_t>& mine, int threads,
                           const std::function<void(size_t finished)>& progress, int* started) {
  std::vector<Json> rows(mine.size());
  std::atomic<size_t> next{0}, done{0};
  std::mutex report;
  std::exception_ptr failure;  // the first worker's exception, under `report`
  auto work = [&] {
    try {
      Work(rows, next, done, report, points, mine, workload, progress);
    } catch (...) {
      std::lock_guard<std::mutex> lock(report);
      if (!failure) failure = std::current_exception();
      next = mine.size();  // the others stop after their current configuration
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {  // EAGAIN: no memory for its stack, or no process left
      break;
    }
  }
  if (started != nullptr) *started = 1 + static_cast<int>(pool.size());
  work();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  return rows;
}

}  // namespace kvshard::sim
