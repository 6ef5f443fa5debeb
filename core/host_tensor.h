// HostTensor, the row-major host byte tensor the CP data paths (reference, fast, GPU tests, benchmarks) pass
// around, and its shape check.
#ifndef KVSHARD_CORE_HOST_TENSOR_H_
#define KVSHARD_CORE_HOST_TENSOR_H_

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace kvshard {

// A row-major host tensor: `rows` rows of `row_bytes` bytes each (dim 0 is the token dimension).
struct HostTensor {
  int64_t rows = 0;
  int64_t row_bytes = 1;
  std::vector<uint8_t> data;  // rows * row_bytes bytes

  // A zero-filled tensor.
  static HostTensor Zeros(int64_t rows, int64_t row_bytes);
  // One 8-byte row per value (host byte order): how the CP data paths carry int64 lists such as locs.
  static HostTensor FromInt64s(const std::vector<int64_t>& values);
  // The 8-byte rows as int64 values (row_bytes must be 8).
  std::vector<int64_t> Int64s() const;
  // Pointer to row i.
  uint8_t* row(int64_t i) { return data.data() + i * row_bytes; }
  // Pointer to row i (const).
  const uint8_t* row(int64_t i) const { return data.data() + i * row_bytes; }
  // Same shape and bytes.
  bool operator==(const HostTensor&) const = default;
};

// OK iff 1 <= row_bytes <= 2^30, 0 <= rows * row_bytes <= 2^40 and data holds rows * row_bytes bytes (the
// message names `field`).
Status ValidateHostTensor(const HostTensor& t, const char* field);

}  // namespace kvshard

#endif  // KVSHARD_CORE_HOST_TENSOR_H_
