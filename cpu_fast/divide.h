// Division by a divisor known only at run time through multiplication: the fast planners' replacement for a
// 64-bit idiv per element (cpu_ref/ divides with / and %).
#ifndef KVSHARD_CPU_FAST_DIVIDE_H_
#define KVSHARD_CPU_FAST_DIVIDE_H_

#include <cstdint>

namespace kvshard::fast {

// Numerators FastDivMod divides exactly (any numerator when the divisor is a power of two).
inline constexpr int64_t kFastDivLimit = int64_t{1} << 32;

// Quotient and remainder by a divisor d >= 1 via a 64-bit reciprocal (Lemire), exact for numerators < 2^32.
class FastDivMod {
 public:
  explicit FastDivMod(uint64_t d)
      : d_(d), m_(d == 1 ? 0 : UINT64_MAX / d + 1), shift_((d & (d - 1)) == 0 ? __builtin_ctzll(d) : -1) {}
  // n / d.
  uint64_t Div(uint64_t n) const {
    if (shift_ >= 0) return n >> shift_;
    return static_cast<uint64_t>((static_cast<unsigned __int128>(m_) * n) >> 64);
  }
  // n % d.
  uint64_t Mod(uint64_t n) const {
    if (shift_ >= 0) return n & (d_ - 1);
    return static_cast<uint64_t>((static_cast<unsigned __int128>(m_ * n) * d_) >> 64);
  }

 private:
  uint64_t d_, m_;
  int shift_;  // log2(d) when d is a power of two, else -1
};

// Numerators Divider divides exactly.
inline constexpr int64_t kDividerLimit = int64_t{1} << 52;

// Quotient by a divisor d >= 1 through a double reciprocal plus one exact fix-up step, for 0 <= n < 2^52.
class Divider {
 public:
  explicit Divider(int64_t d) : d_(d), inv_(1.0 / static_cast<double>(d)) {}
  // n / d.
  int64_t Div(int64_t n) const {
    const int64_t q = static_cast<int64_t>(static_cast<double>(n) * inv_);
    const int64_t r = n - q * d_;
    return r < 0 ? q - 1 : (r >= d_ ? q + 1 : q);
  }

 private:
  int64_t d_;
  double inv_;
};

}  // namespace kvshard::fast

#endif  // KVSHARD_CPU_FAST_DIVIDE_H_
