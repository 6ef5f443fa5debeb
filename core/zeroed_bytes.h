// Byte arrays that start as zeros without writing them: a simulated KV pool of a large trace (a Mooncake trace's
// 20 M slots a layer) is hundreds of MB that a replay mostly never touches, and zeroing it up front faulted in every
// page of it on the checking thread before the first record.
#ifndef KVSHARD_CORE_ZEROED_BYTES_H_
#define KVSHARD_CORE_ZEROED_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace kvshard {

// A fixed number of bytes, zero until written, from calloc: a large block is fresh zero pages, faulted in only where
// written. Copies copy the bytes; the size never changes.
class ZeroedBytes {
 public:
  explicit ZeroedBytes(size_t n = 0) : bytes_(Allocate(n, /*zero=*/true)), size_(n) {}
  ZeroedBytes(const ZeroedBytes& other) : bytes_(Allocate(other.size_, /*zero=*/false)), size_(other.size_) {
    if (size_ > 0) std::memcpy(bytes_.get(), other.bytes_.get(), size_);
  }
  ZeroedBytes& operator=(const ZeroedBytes& other) {
    if (this != &other) *this = ZeroedBytes(other);
    return *this;
  }
  ZeroedBytes(ZeroedBytes&& other) noexcept = default;
  ZeroedBytes& operator=(ZeroedBytes&& other) noexcept = default;

  uint8_t* data() { return bytes_.get(); }
  const uint8_t* data() const { return bytes_.get(); }
  size_t size() const { return size_; }
  uint8_t& operator[](size_t i) { return bytes_[i]; }
  uint8_t operator[](size_t i) const { return bytes_[i]; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  static std::unique_ptr<uint8_t[], Free> Allocate(size_t n, bool zero) {
    void* p = zero ? std::calloc(n == 0 ? 1 : n, 1) : std::malloc(n == 0 ? 1 : n);
    if (p == nullptr) throw std::bad_alloc();
    return std::unique_ptr<uint8_t[], Free>(static_cast<uint8_t*>(p));
  }

  std::unique_ptr<uint8_t[], Free> bytes_;
  size_t size_ = 0;
};

}  // namespace kvshard

#endif  // KVSHARD_CORE_ZEROED_BYTES_H_
