// The simulator's sweep (sim/sweep.h) against a naive odometer: the configurations of random axes are the
// cartesian product in order (the first axis slowest, the last fastest), each with exactly its swept values set
// on the base and reported, and a product past the limit is refused. Written from the definition, not the code.
#include <algorithm>
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

// One to three axes whose product lands just below, at or just past kMaxSweepConfigs (the leading axes' sizes are
// half the time divisors of the limit, so the product hits it exactly): the product up to the limit is built, one
// configuration more is refused with the limit named.
TEST(SweepProps, AProductPastTheLimitIsRefused) {
  RecordPropertyCases(CheckProperty(
      CurrentTestId(),
      [] {
        constexpr int64_t kLimit = static_cast<int64_t>(sim::kMaxSweepConfigs);
        const int n_axes = *rc::gen::element(1, 2, 3);
        std::vector<int64_t> sizes;
        int64_t lead = 1;
        for (int a = 0; a + 1 < n_axes; ++a) {
          const int64_t size = *rc::gen::oneOf(rc::gen::element<int64_t>(2, 4, 5, 8, 10, 16, 25, 32, 40, 50, 100),
                                               rc::gen::inRange<int64_t>(1, 60));
          sizes.push_back(size);
          lead *= size;
        }
        sizes.push_back(std::max<int64_t>(1, kLimit / lead + *rc::gen::element<int64_t>(-1, 0, 1)));
        int64_t product = 1;
        std::vector<sim::SweepAxis> axes;
        const char* const keys[] = {"shard-size", "page-size", "layers"};
        for (int a = 0; a < n_axes; ++a) {
          axes.push_back({keys[a], {}});
          for (int64_t v = 1; v <= sizes[a]; ++v) axes.back().values.push_back(v);
          product *= sizes[a];
        }
        RC_TAG(product < kLimit ? "below" : product == kLimit ? "at the limit" : "past");
        const StatusOr<std::vector<sim::SweepPoint>> points = sim::SweepConfigs(axes, sim::SimConfig{});
        if (product > kLimit) {
          RC_ASSERT(!points.ok());
          RC_ASSERT(points.status().message() == "sweep: more than 100000 configurations");
        } else {
          RC_ASSERT(points.ok());
          RC_ASSERT(static_cast<int64_t>(points->size()) == product);
        }
      },
      FractionOfCases(20, 20)));  // a case at the limit builds about 100,000 configurations
}

}  // namespace
}  // namespace kvshard::props
