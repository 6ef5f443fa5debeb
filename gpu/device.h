// Device discovery and RAII device memory for the GPU backend (host-safe header).
#ifndef KVSHARD_GPU_DEVICE_H_
#define KVSHARD_GPU_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gpu/stream.h"

namespace kvshard::gpu {

// Number of visible CUDA devices; 0 (with the reason in *why) when there is no driver or device.
int VisibleDeviceCount(std::string* why = nullptr);
// "NVIDIA H200 (sm_90, 139 GiB)" for device `ordinal`.
std::string DeviceDescription(int ordinal);
// Sets CUDA_DEVICE_MAX_CONNECTIONS, the hardware work queues of each context (the driver's default is 8), to `queues`
// (1..32) unless the environment already sets it. A context with fewer queues is faster to make and to tear down
// (docs/PERFORMANCE.md, the twenty-eighth round: 0.06-0.08 s for 1-2 queues against 0.10-0.15 s for 8); streams
// beyond `queues` share a queue, and work on a shared queue runs in submission order, so a caller passes at least its
// streams. Call it before the process's first CUDA call, while it runs one thread (it calls setenv).
void PreferHardwareQueues(int queues);
// Makes `device` current and creates its primary context now (not at the first call that needs it), so that a caller
// can time the context apart from what it then allocates.
Status StartContext(int device);

namespace internal {

// Frees what DeviceBuffer (cudaFree) and PinnedBuffer (cudaFreeHost) own.
void FreeDeviceMemory(void* ptr);
void FreePinnedMemory(void* ptr);

// Move-only ownership of `bytes` at `ptr`, released by kFree: what DeviceBuffer and PinnedBuffer share.
template <void (*kFree)(void*)>
class OwnedMemory {
 public:
  OwnedMemory() = default;
  ~OwnedMemory() {
    if (ptr_) kFree(ptr_);
  }
  OwnedMemory(const OwnedMemory&) = delete;
  OwnedMemory& operator=(const OwnedMemory&) = delete;
  OwnedMemory(OwnedMemory&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  OwnedMemory& operator=(OwnedMemory&& other) noexcept {
    if (this != &other) {
      if (ptr_) kFree(ptr_);
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 protected:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace internal

// Owning device allocation (cudaMalloc/cudaFree) on the current device.
class DeviceBuffer : public internal::OwnedMemory<internal::FreeDeviceMemory> {
 public:
  // Allocates `bytes` (0 allowed: no allocation).
  static StatusOr<DeviceBuffer> Allocate(size_t bytes);
};

// Owning page-locked host allocation (cudaHostAlloc/cudaFreeHost): asynchronous copies from and to it overlap with
// the host's own work.
class PinnedBuffer : public internal::OwnedMemory<internal::FreePinnedMemory> {
 public:
  // Allocates `bytes` (0 allowed: no allocation).
  static StatusOr<PinnedBuffer> Allocate(size_t bytes);
};

// Makes *buffer hold at least `bytes` (reallocated, contents dropped, when smaller; at least doubling): the reused
// buffers of a loop. Whatever used the old memory must have finished.
Status Reserve(DeviceBuffer* buffer, size_t bytes);
Status Reserve(PinnedBuffer* buffer, size_t bytes);

// Host -> device copy of `bytes`, complete on return (safe for kernels on any stream).
Status CopyToDevice(void* dst, const void* src, size_t bytes);
// Device -> host copy of `bytes` (synchronous).
Status CopyToHost(void* dst, const void* src, size_t bytes);
// Allocates and uploads a host vector.
template <typename T>
StatusOr<DeviceBuffer> Upload(const std::vector<T>& host) {
  KVSHARD_ASSIGN_OR_RETURN(DeviceBuffer buf, DeviceBuffer::Allocate(host.size() * sizeof(T)));
  KVSHARD_RETURN_IF_ERROR(CopyToDevice(buf.data(), host.data(), host.size() * sizeof(T)));
  return buf;
}
// Downloads `n` elements of T.
template <typename T>
StatusOr<std::vector<T>> Download(const void* src, size_t n) {
  std::vector<T> host(n);
  KVSHARD_RETURN_IF_ERROR(CopyToHost(host.data(), src, n * sizeof(T)));
  return host;
}
// Waits for `stream` and reports any asynchronous kernel error.
Status SyncStream(cudaStream_t stream);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_DEVICE_H_
