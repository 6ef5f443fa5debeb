// Device discovery and memory helpers.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "gpu/device.h"
#include "gpu/nvtx.h"

namespace kvshard::gpu {

int VisibleDeviceCount(std::string* why) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why) *why = StrCat(cudaGetErrorName(err), ": ", cudaGetErrorString(err));
    cudaGetLastError();  // clear the sticky-free error
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount returned 0";
  return n;
}

void PreferHardwareQueues(int queues) {
  KVSHARD_CHECK(queues >= 1 && queues <= 32);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", std::to_string(queues).c_str(), /*overwrite=*/0);
}

Status StartContext(int device) {
  KVSHARD_CUDA_CHECK(cudaSetDevice(device));
  KVSHARD_CUDA_CHECK(cudaFree(nullptr));  // the runtime's way to make the current device's context now
  return Status::Ok();
}

std::string DeviceDescription(int ordinal) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) return "unknown device";
  return StrCat(prop.name, " (sm_", prop.major, prop.minor, ", ", prop.totalGlobalMem >> 30, " GiB)");
}

namespace internal {

void FreeDeviceMemory(void* ptr) { cudaFree(ptr); }
void FreePinnedMemory(void* ptr) { cudaFreeHost(ptr); }

}  // namespace internal

StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  KVSHARD_NVTX_RANGE("kvshard.device.allocate");
  DeviceBuffer buf;
  if (bytes == 0) return buf;
  KVSHARD_CUDA_CHECK(cudaMalloc(&buf.ptr_, bytes));
  buf.bytes_ = bytes;
  return buf;
}

StatusOr<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes) {
  KVSHARD_NVTX_RANGE("kvshard.device.allocate_pinned");
  PinnedBuffer buf;
  if (bytes == 0) return buf;
  KVSHARD_CUDA_CHECK(cudaHostAlloc(&buf.ptr_, bytes, cudaHostAllocDefault));
  buf.bytes_ = bytes;
  return buf;
}

namespace {

template <typename Buffer>
Status ReserveBuffer(Buffer* buffer, size_t bytes) {
  const size_t had = buffer->bytes();
  if (had >= bytes) return Status::Ok();
  *buffer = Buffer();  // the old memory first: the peak is the new size
  KVSHARD_ASSIGN_OR_RETURN(*buffer, Buffer::Allocate(std::max(bytes, 2 * had)));
  return Status::Ok();
}

}  // namespace

Status Reserve(DeviceBuffer* buffer, size_t bytes) { return ReserveBuffer(buffer, bytes); }
Status Reserve(PinnedBuffer* buffer, size_t bytes) { return ReserveBuffer(buffer, bytes); }

Status CopyToDevice(void* dst, const void* src, size_t bytes) {
  KVSHARD_NVTX_RANGE("kvshard.device.copy_to_device");
  if (bytes == 0) return Status::Ok();
  KVSHARD_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before the DMA lands; kernels on non-blocking streams do not
  // wait for the legacy stream, so finish the copy here.
  KVSHARD_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  return Status::Ok();
}

Status CopyToHost(void* dst, const void* src, size_t bytes) {
  KVSHARD_NVTX_RANGE("kvshard.device.copy_to_host");
  if (bytes == 0) return Status::Ok();
  KVSHARD_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  return Status::Ok();
}

Status SyncStream(cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.device.sync_stream");
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  KVSHARD_CUDA_CHECK(cudaStreamSynchronize(stream));
  return Status::Ok();
}

}  // namespace kvshard::gpu
