// Shared by the fuzz targets: a byte decoder with edge-biased integers and the failure macro.
#ifndef KVSHARD_FUZZ_FUZZ_UTIL_H_
#define KVSHARD_FUZZ_FUZZ_UTIL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/status.h"

// Aborts (the fuzzer's crash) with the failed condition and a message when `cond` is false.
#define FUZZ_ASSERT(cond, ...)                                                                   \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      std::fprintf(stderr, "fuzz: %s:%d: assertion failed: %s: %s\n", __FILE__, __LINE__, #cond, \
                   ::kvshard::StrCat(__VA_ARGS__).c_str());                                      \
      std::abort();                                                                              \
    }                                                                                            \
  } while (0)

namespace kvshard::fuzz {

// Reads typed values off the front of the fuzzer's bytes; past the end every read is 0.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool Bool() { return Byte() & 1; }
  // `bytes` bytes little-endian.
  uint64_t Bits(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{Byte()} << (8 * i);
    return v;
  }
  // An integer in [lo, hi] (hi - lo < 2^32).
  int64_t Range(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(Bits(4) % span);
  }
  // An int64 biased to the edges a length or size can take: small values, the limits of `limit` (the model's
  // largest accepted value) and one past them, negatives, the int64 extremes and arbitrary 64-bit values.
  int64_t Edgy(int64_t limit) {
    switch (Byte() % 12) {
      case 0:
      case 1:
      case 2:
      case 3: return Byte();  // 0..255
      case 4:
      case 5: return static_cast<int64_t>(Bits(2));  // 0..65535
      case 6: return limit;
      case 7: return limit < std::numeric_limits<int64_t>::max() ? limit + 1 : limit;
      case 8: return -static_cast<int64_t>(Byte());  // 0..-255
      case 9: return Byte() & 1 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
      case 10: return static_cast<int64_t>(Bits(4));  // 0..2^32-1
      default: return static_cast<int64_t>(Bits(8));  // anything
    }
  }
  // a + b, clamped to the int64 range (decoders add offsets to edge values).
  static int64_t SatAdd(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
      return a < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
    return r;
  }
  // The bytes not read yet.
  std::string Rest() {
    std::string s(reinterpret_cast<const char*>(data_) + std::min(pos_, size_), size_ - std::min(pos_, size_));
    pos_ = size_;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace kvshard::fuzz

#endif  // KVSHARD_FUZZ_FUZZ_UTIL_H_
