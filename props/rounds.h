// Runs a RapidCheck property for several rounds, each from its own seed (the configured seed mixed with the
// round): rounds x max_success cases (RC_PARAMS; 2000 under .bazelrc), for properties that deserve more than one.
#ifndef KVSHARD_PROPS_ROUNDS_H_
#define KVSHARD_PROPS_ROUNDS_H_

#include <cstdint>
#include <string>

#include "props/property.h"

namespace kvshard::props {

// Each failing round prints RapidCheck's shrunk counterexample and reproduce string (keyed by the round's
// id, so RC_PARAMS="reproduce=..." replays it) and fails the test; the cases of all rounds are recorded.
// rc::check alone would start every round from the same configured seed and repeat the same cases.
template <typename Property>
void CheckRounds(const std::string& name, int rounds, Property property) {
  int64_t cases = 0;
  for (int i = 1; i <= rounds; ++i) {
    rc::detail::TestParams params = rc::detail::configuration().testParams;
    params.seed += static_cast<uint64_t>(i - 1) * 0x9e3779b97f4a7c15ULL;  // round 1 keeps the configured seed
    cases += CheckProperty(name + " round " + std::to_string(i), property, params);
  }
  RecordPropertyCases(cases);
}

}  // namespace kvshard::props

#endif  // KVSHARD_PROPS_ROUNDS_H_
