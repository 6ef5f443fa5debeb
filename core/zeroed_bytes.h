// Byte arrays that start as zeros without writing them: a simulated KV pool of a large trace (a Mooncake trace's
// 20 M slots a layer) is hundreds of MB that a replay mostly never touches, and zeroing it up front faulted in every
// page of it on the checking thread before the first record.
#ifndef KVSHARD_CORE_ZEROED_BYTES_H_
#define KVSHARD_CORE_ZEROED_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

namespace kvshard {

// A std::allocator for trivial types whose memory comes from calloc (large blocks are fresh zero pages, faulted in
// only where written) and whose value-initialization writes nothing: the calloc'd zeros are the values.
template <typename T>
struct ZeroPageAllocator {
  using value_type = T;
  ZeroPageAllocator() = default;
  template <typename U>
  ZeroPageAllocator(const ZeroPageAllocator<U>&) {}  // NOLINT: allocators convert implicitly

  T* allocate(size_t n) {
    void* p = std::calloc(n == 0 ? 1 : n, sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  // Value-initialization (vector(n), resize(n)) leaves calloc's zeros; every other construction is as usual.
  template <typename U>
  void construct(U*) {}
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const ZeroPageAllocator<U>&) const {
    return true;
  }
};

// Bytes that read as zero until written; `ZeroedBytes(n)` touches none of its n bytes' pages (only a vector grown
// later copies them).
using ZeroedBytes = std::vector<uint8_t, ZeroPageAllocator<uint8_t>>;

}  // namespace kvshard

#endif  // KVSHARD_CORE_ZEROED_BYTES_H_
