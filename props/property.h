// RapidCheck properties as GoogleTest tests that say how many cases ran: the count is printed and recorded in
// the JUnit XML as `rapidcheck_cases`, which tools/test_summary.py totals for the CI log.
#ifndef KVSHARD_PROPS_PROPERTY_H_
#define KVSHARD_PROPS_PROPERTY_H_

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>

#include <gtest/gtest.h>
#include <rapidcheck.h>

namespace kvshard::props {

// Runs `testable` under `id` from `params`, prints the result and fails the running test on a counterexample
// (shrunk case and reproduce string in the message). Returns the number of cases that passed.
template <typename Testable>
int64_t CheckProperty(const std::string& id, Testable&& testable, const rc::detail::TestParams& params) {
  rc::detail::TestMetadata metadata;
  metadata.id = id;
  metadata.description = id;
  const rc::detail::TestResult result = rc::detail::checkTestable(std::forward<Testable>(testable), metadata, params);
  std::ostringstream message;
  rc::detail::printResultMessage(result, message);
  int64_t cases = 0;
  if (result.template is<rc::detail::SuccessResult>()) {
    cases = result.template get<rc::detail::SuccessResult>().numSuccess;
    std::cout << "- " << id << ": " << message.str() << "\n";
  } else {
    if (result.template is<rc::detail::FailureResult>())
      cases = result.template get<rc::detail::FailureResult>().numSuccess;
    ADD_FAILURE() << id << ": " << message.str();
  }
  return cases;
}

// Records the running test's property case count in its JUnit XML entry.
inline void RecordPropertyCases(int64_t cases) {
  ::testing::Test::RecordProperty("rapidcheck_cases", std::to_string(cases));
}

// The configured test parameters (RC_PARAMS) with 1/divisor of the cases, at least `at_least`: for properties whose
// cases are far heavier than the rest.
inline rc::detail::TestParams FractionOfCases(int divisor, int at_least) {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = std::max(at_least, params.maxSuccess / divisor);
  return params;
}

// The running GoogleTest's id, "Suite/Name" (RapidCheck's reproduce key for RC_GTEST_PROP).
inline std::string CurrentTestId() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->test_suite_name()) + "/" + info->name();
}

}  // namespace kvshard::props

// KVSHARD_PROP(Suite, Name, ()) { ... }: RC_GTEST_PROP that prints and records its case count.
#define KVSHARD_PROP(Suite, Name, ArgList)                                                                          \
  void KvshardProp_##Suite##_##Name ArgList;                                                                        \
  TEST(Suite, Name) {                                                                                               \
    ::kvshard::props::RecordPropertyCases(::kvshard::props::CheckProperty(                                          \
        ::kvshard::props::CurrentTestId(), &KvshardProp_##Suite##_##Name, rc::detail::configuration().testParams)); \
  }                                                                                                                 \
  void KvshardProp_##Suite##_##Name ArgList

#endif  // KVSHARD_PROPS_PROPERTY_H_
