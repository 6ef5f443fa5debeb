// RapidCheck helpers that turn an unexpected error Status into a failing RC_ASSERT carrying its message,
// never an abort: the property shrinks, prints its reproduce string, and the properties after it still run.
#ifndef KVSHARD_PROPS_RC_STATUS_H_
#define KVSHARD_PROPS_RC_STATUS_H_

#include <string>
#include <utility>

#include <rapidcheck.h>

#include "core/status.h"

namespace kvshard::props {

// The value of `s`, or a failed property naming `expr` and the status (code and message).
template <typename T>
T ValueOrFail(StatusOr<T> s, const char* expr) {
  if (!s.ok()) RC_FAIL(std::string(expr) + " returned " + s.status().ToString());
  return std::move(s).value();
}

// Fails the property naming `expr` and the status when it is an error.
inline void OkOrFail(const Status& s, const char* expr) {
  if (!s.ok()) RC_FAIL(std::string(expr) + " returned " + s.ToString());
}

}  // namespace kvshard::props

// RC_VALUE(statusor_expr): the value, or a failing property case carrying the error (no abort).
#define RC_VALUE(expr) ::kvshard::props::ValueOrFail((expr), #expr)
// RC_ASSERT_OK(status_expr): a failing property case carrying the error when the status is not OK.
#define RC_ASSERT_OK(expr) ::kvshard::props::OkOrFail((expr), #expr)

#endif  // KVSHARD_PROPS_RC_STATUS_H_
