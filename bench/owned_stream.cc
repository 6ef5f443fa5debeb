// OwnedStream: cudaStreamCreateWithFlags / cudaStreamDestroy on the stream's own device.
#include "bench/owned_stream.h"

#include <utility>

#include <cuda_runtime.h>

namespace kvshard::bench {

OwnedStream::~OwnedStream() { Reset(); }

OwnedStream::OwnedStream(OwnedStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_) {}

OwnedStream& OwnedStream::operator=(OwnedStream&& other) noexcept {
  if (this != &other) {
    Reset();
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

StatusOr<OwnedStream> OwnedStream::Create(int device) {
  OwnedStream s;
  KVSHARD_CUDA_CHECK(cudaSetDevice(device));
  KVSHARD_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking));
  s.device_ = device;
  return s;
}

void OwnedStream::Reset() {
  if (stream_ == nullptr) return;
  int current = -1;
  const bool switch_back = cudaGetDevice(&current) == cudaSuccess && current != device_;
  cudaSetDevice(device_);
  cudaStreamDestroy(stream_);  // pending work still completes; the handle is released afterwards
  if (switch_back) cudaSetDevice(current);
  stream_ = nullptr;
}

StatusOr<std::vector<OwnedStream>> CreateStreams(const std::vector<int>& devices) {
  std::vector<OwnedStream> streams;
  for (int d : devices) {
    KVSHARD_ASSIGN_OR_RETURN(OwnedStream s, OwnedStream::Create(d));
    streams.push_back(std::move(s));
  }
  return streams;
}

std::vector<cudaStream_t> RawStreams(const std::vector<OwnedStream>& streams) {
  std::vector<cudaStream_t> raw;
  for (const OwnedStream& s : streams) raw.push_back(s.get());
  return raw;
}

}  // namespace kvshard::bench
