// The simulator's sweep (sim/sweep.h) against a naive odometer: the configurations of random axes are the
// cartesian product in order (the first axis slowest, the last fastest), each with exactly its swept values set
// on the base and reported, and a product past the limit is refused. Written from the definition, not the code.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "props/property.h"
#include "props/rc_status.h"
#include "sim/result_json.h"
#include "sim/sweep.h"

namespace kvshard::props {
namespace {

// Distinct integer knobs, each a field of SimConfig read back through the result JSON's "config" object.
struct IntKnob {
  const char* key;
  const char* config_key;
};
const IntKnob kIntKnobs[] = {{"shard-size", "shard_size"},
                             {"page-size", "page_size"},
                             {"cp-size", "cp_size"},
                             {"cache-tokens", "cache_tokens"},
                             {"chunked-prefill-size", "chunked_prefill_size"},
                             {"max-prefill-tokens", "max_prefill_tokens"},
                             {"layers", "layers"}};

// Every pick of one value per axis, in odometer order (the last axis turns fastest).
void Odometer(const std::vector<std::vector<int64_t>>& axes, size_t a, std::vector<int64_t>& pick,
              std::vector<std::vector<int64_t>>& out) {
  if (a == axes.size()) {
    out.push_back(pick);
    return;
  }
  for (int64_t v : axes[a]) {
    pick.push_back(v);
    Odometer(axes, a + 1, pick, out);
    pick.pop_back();
  }
}

KVSHARD_PROP(SweepProps, ConfigurationsAreTheProductInOdometerOrder, ()) {
  const size_t n_axes = *rc::gen::inRange<size_t>(0, 5);
  const std::vector<size_t> which = *rc::gen::unique<std::vector<size_t>>(
      n_axes, rc::gen::inRange<size_t>(0, sizeof(kIntKnobs) / sizeof(kIntKnobs[0])));
  std::vector<sim::SweepAxis> axes;
  std::vector<std::vector<int64_t>> values;
  for (size_t k : which) {
    values.push_back(*rc::gen::container<std::vector<int64_t>>(*rc::gen::inRange<size_t>(1, 4),
                                                               rc::gen::inRange<int64_t>(1, 100000)));
    axes.push_back({kIntKnobs[k].key, {}});
    for (int64_t v : values.back()) axes.back().values.push_back(v);
  }
  sim::SimConfig base;
  base.shard_size = 3;
  base.page_size = 7;
  const std::vector<sim::SweepPoint> points = RC_VALUE(sim::SweepConfigs(axes, base));
  std::vector<std::vector<int64_t>> want;
  std::vector<int64_t> pick;
  Odometer(values, 0, pick, want);
  RC_ASSERT(points.size() == want.size());
  for (size_t i = 0; i < points.size(); ++i) {
    const Json config = sim::ResultJson(sim::SimResult{}, points[i].config)["config"];
    const Json base_config = sim::ResultJson(sim::SimResult{}, base)["config"];
    RC_ASSERT(points[i].swept.size() == axes.size());
    for (const auto& [key, value] : base_config.items()) {  // unswept fields keep the base's value
      bool swept = false;
      for (size_t a = 0; a < which.size(); ++a) swept |= key == kIntKnobs[which[a]].config_key;
      if (!swept) RC_ASSERT(config.at(key) == value);
    }
    for (size_t a = 0; a < which.size(); ++a) {
      RC_ASSERT(points[i].swept.at(kIntKnobs[which[a]].key).get<int64_t>() == want[i][a]);
      RC_ASSERT(config.at(kIntKnobs[which[a]].config_key).get<int64_t>() == want[i][a]);
    }
  }
}

KVSHARD_PROP(SweepProps, AProductPastTheLimitIsRefused, ()) {
  // per_axis^3 configurations around the limit: 46^3 fits, 47^3 does not.
  const int64_t per_axis = *rc::gen::inRange<int64_t>(40, 60);
  std::vector<sim::SweepAxis> axes;
  for (const char* key : {"shard-size", "page-size", "layers"}) {
    axes.push_back({key, {}});
    for (int64_t v = 1; v <= per_axis; ++v) axes.back().values.push_back(v);
  }
  const StatusOr<std::vector<sim::SweepPoint>> points = sim::SweepConfigs(axes, sim::SimConfig{});
  const bool over = static_cast<size_t>(per_axis * per_axis * per_axis) > sim::kMaxSweepConfigs;
  RC_ASSERT(points.ok() == !over);
  if (over) RC_ASSERT(points.status().message() == "sweep: more than 100000 configurations");
}

}  // namespace
}  // namespace kvshard::props
