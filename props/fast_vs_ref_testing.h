// Helpers shared by the cpu_fast/ vs cpu_ref/ differential properties (props/fast_vs_ref_*_props_test.cc): uniform
// draws at every size, the CP error label of the case distributions, and the status check of a differential case.
#ifndef KVSHARD_PROPS_FAST_VS_REF_TESTING_H_
#define KVSHARD_PROPS_FAST_VS_REF_TESTING_H_

#include <cstdint>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "core/status.h"

namespace kvshard::props {

using V = std::vector<int64_t>;

// A fault kind in [0, kinds), uniform at every size (rc::gen::inRange scales with the size, from 0).
inline int DrawKind(int kinds) { return *rc::gen::resize(100, rc::gen::inRange(0, kinds)); }

// One of `values`, uniform at every size.
inline int64_t Pick(const std::vector<int64_t>& values) { return values[DrawKind(static_cast<int>(values.size()))]; }

// A CP error's label for the case distribution: its fail-fast tag (and rerange reason), or the field it names.
inline std::string CpErrorLabel(const Status& s) {
  const std::string& m = s.message();
  if (s.ok()) return "ok";
  const std::string fail_fast = "[CP_SHARED_KV_FAIL_FAST][";
  if (m.rfind(fail_fast, 0) != 0) {  // the field, request index dropped
    const std::string field = m.substr(0, m.find(':'));
    return field.substr(0, field.find('['));
  }
  const size_t tag_end = m.find(']', fail_fast.size()), reason = m.find("reason=");
  return m.substr(fail_fast.size(), tag_end - fail_fast.size()) +
         (reason == std::string::npos ? "" : " " + m.substr(reason, m.find(' ', reason) - reason));
}

// Both succeeded, or both failed with the same code and message.
inline void AssertSameStatus(const Status& fast, const Status& ref) { RC_ASSERT(fast.ToString() == ref.ToString()); }

}  // namespace kvshard::props

#endif  // KVSHARD_PROPS_FAST_VS_REF_TESTING_H_
