// HostTensor construction and its shape check.
#include "core/host_tensor.h"

#include <cstring>

namespace kvshard {

HostTensor HostTensor::Zeros(int64_t rows, int64_t row_bytes) {
  HostTensor t;
  t.rows = rows;
  t.row_bytes = row_bytes;
  t.data.assign(static_cast<size_t>(rows * row_bytes), 0);
  return t;
}

HostTensor HostTensor::FromInt64s(const std::vector<int64_t>& values) {
  HostTensor t = Zeros(static_cast<int64_t>(values.size()), 8);
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), values.size() * 8);
  return t;
}

std::vector<int64_t> HostTensor::Int64s() const {
  KVSHARD_CHECK(row_bytes == 8);
  std::vector<int64_t> values(static_cast<size_t>(rows));
  if (rows > 0) std::memcpy(values.data(), data.data(), values.size() * 8);
  return values;
}

Status ValidateHostTensor(const HostTensor& t, const char* field) {
  if (t.row_bytes < 1 || t.row_bytes > (int64_t{1} << 30)) {
    return InvalidArgument(field, ": row_bytes must be in [1, 2^30], got ", t.row_bytes);
  }
  if (t.rows < 0 || t.rows > (int64_t{1} << 40) / t.row_bytes ||
      static_cast<int64_t>(t.data.size()) != t.rows * t.row_bytes) {
    return InvalidArgument(field, ": data must hold rows * row_bytes bytes (rows=", t.rows, ", row_bytes=", t.row_bytes,
                           ", bytes=", t.data.size(), ")");
  }
  return Status::Ok();
}

}  // namespace kvshard
