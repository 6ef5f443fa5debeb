// The splitmix64 finalizer: a fixed 64-bit mix, the same on every platform (std::hash is implementation-defined),
// for the deterministic payloads and fingerprints the reference pool and the simulator derive from integers.
#ifndef KVSHARD_CORE_HASH_H_
#define KVSHARD_CORE_HASH_H_

#include <cstdint>

// Functions the host and CUDA kernels share (core/ stays host-safe: the qualifiers exist only under nvcc).
#if defined(__CUDACC__)
#define KVSHARD_HOST_DEVICE __host__ __device__
#else
#define KVSHARD_HOST_DEVICE
#endif

namespace kvshard {

// splitmix64's output function applied to x + golden gamma.
KVSHARD_HOST_DEVICE inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace kvshard

#endif  // KVSHARD_CORE_HASH_H_
