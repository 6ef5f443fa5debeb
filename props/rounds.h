// Runs a RapidCheck property for several rounds with distinct ids (hence distinct seeds): rounds x
// max_success cases (RC_PARAMS, 1000 by default), for the properties that deserve more than one round.
#ifndef KVSHARD_PROPS_ROUNDS_H_
#define KVSHARD_PROPS_ROUNDS_H_

#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>

namespace kvshard::props {

// Each failing round prints RapidCheck's shrunk counterexample and reproduce string, and fails the test.
template <typename Property>
void CheckRounds(const std::string& name, int rounds, Property property) {
  for (int i = 1; i <= rounds; ++i) {
    const std::string id = name + " round " + std::to_string(i);
    EXPECT_TRUE(rc::check(id, property)) << id << " failed";
  }
}

}  // namespace kvshard::props

#endif  // KVSHARD_PROPS_ROUNDS_H_
