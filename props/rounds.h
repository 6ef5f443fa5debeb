// Runs a RapidCheck property for several rounds, each from its own seed (the configured seed mixed with the
// round): rounds x max_success cases (RC_PARAMS, 1000 by default), for properties that deserve more than one.
#ifndef KVSHARD_PROPS_ROUNDS_H_
#define KVSHARD_PROPS_ROUNDS_H_

#include <cstdint>
#include <iostream>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>

namespace kvshard::props {

// Each failing round prints RapidCheck's shrunk counterexample and reproduce string (keyed by the round's
// id, so RC_PARAMS="reproduce=..." replays it), and fails the test. rc::check alone would start every round
// from the same configured seed and repeat the same cases.
template <typename Property>
void CheckRounds(const std::string& name, int rounds, Property property) {
  for (int i = 1; i <= rounds; ++i) {
    rc::detail::TestMetadata metadata;
    metadata.id = metadata.description = name + " round " + std::to_string(i);
    rc::detail::TestParams params = rc::detail::configuration().testParams;
    params.seed += static_cast<uint64_t>(i - 1) * 0x9e3779b97f4a7c15ULL;  // round 1 keeps the configured seed
    std::cerr << "\n- " << metadata.id << "\n";
    const rc::detail::TestResult result = rc::detail::checkTestable(property, metadata, params);
    rc::detail::printResultMessage(result, std::cerr);
    std::cerr << "\n";
    EXPECT_TRUE(result.template is<rc::detail::SuccessResult>()) << metadata.id << " failed";
  }
}

}  // namespace kvshard::props

#endif  // KVSHARD_PROPS_ROUNDS_H_
