// RAII ownership of the CUDA streams the benchmarks create, so every return path (errors included) destroys
// them. Host-safe header.
#ifndef KVSHARD_BENCH_OWNED_STREAM_H_
#define KVSHARD_BENCH_OWNED_STREAM_H_

#include <vector>

#include "core/status.h"
#include "gpu/stream.h"

namespace kvshard::bench {

// An owned non-blocking CUDA stream of one device; destroyed (on that device) by the destructor.
class OwnedStream {
 public:
  OwnedStream() = default;
  ~OwnedStream();
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  OwnedStream(OwnedStream&& other) noexcept;
  OwnedStream& operator=(OwnedStream&& other) noexcept;

  // Makes `device` current and creates a non-blocking stream on it (the device stays current).
  static StatusOr<OwnedStream> Create(int device);
  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }

 private:
  // Destroys the stream, if any, leaving the current device as it was.
  void Reset();

  cudaStream_t stream_ = nullptr;
  int device_ = 0;
};

// One non-blocking stream per entry of `devices`, created in order (the last device stays current).
StatusOr<std::vector<OwnedStream>> CreateStreams(const std::vector<int>& devices);
// The raw handles of `streams`, for APIs that take std::vector<cudaStream_t>.
std::vector<cudaStream_t> RawStreams(const std::vector<OwnedStream>& streams);

}  // namespace kvshard::bench

#endif  // KVSHARD_BENCH_OWNED_STREAM_H_
