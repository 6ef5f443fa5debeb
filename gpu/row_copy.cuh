// Device helpers for moving opaque rows: vector width selection and a cooperative group-per-row copy.
// Rows are byte payloads (KV rows, latent rows, index bytes); kernels never interpret them.
#ifndef KVSHARD_GPU_ROW_COPY_CUH_
#define KVSHARD_GPU_ROW_COPY_CUH_

#include <cstdint>
#include <type_traits>
#include <utility>

#include <cuda_runtime.h>

namespace kvshard::gpu {

// Widest power-of-two access (16, 8, 4, 2 or 1 bytes) dividing the row size and every base address.
inline int RowVectorBytes(int64_t row_bytes, const void* a, const void* b) {
  const uint64_t bits =
      static_cast<uint64_t>(row_bytes) | reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b);
  for (int v = 16; v > 1; v /= 2) {
    if (bits % v == 0) return v;
  }
  return 1;
}

template <int kBytes>
struct VecOf;
template <>
struct VecOf<16> {
  using T = uint4;
};
template <>
struct VecOf<8> {
  using T = uint2;
};
template <>
struct VecOf<4> {
  using T = uint32_t;
};
template <>
struct VecOf<2> {
  using T = uint16_t;
};
template <>
struct VecOf<1> {
  using T = uint8_t;
};

// Threads of a row group (a power of two <= 32) for rows of `vecs` vectors.
inline int GroupSizeFor(int64_t vecs) {
  int g = 1;
  while (g < 32 && g < vecs) g *= 2;
  return g;
}

// Copies one row (or any contiguous span) of `vecs` vectors; lane in [0, group) of a group of `group` threads.
// Each thread issues up to four loads before its stores, so several requests per thread are in flight.
// Row groups (group <= 32) use the default int Index; a whole block copying one long span passes
// Index = int64_t (lane = threadIdx.x, group = blockDim.x): with 64-bit strides nvcc keeps the unrolled
// addresses as running 64-bit sums, where int strides are re-widened every iteration.
template <typename V, typename Index = int>
__device__ __forceinline__ void CopyRow(V* __restrict__ dst, const V* __restrict__ src, int64_t vecs,
                                        std::type_identity_t<Index> lane, std::type_identity_t<Index> group) {
  for (int64_t base = lane; base < vecs; base += 4 * group) {
    V r[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (base + k * group < vecs) r[k] = src[base + k * group];
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (base + k * group < vecs) dst[base + k * group] = r[k];
    }
  }
}

// Group id, lane and group count of the calling thread in a persistent grid of row groups (blockIdx.x).
struct GroupPos {
  int64_t id, count;
  int lane;
};
__device__ __forceinline__ GroupPos MyGroup(int group) {
  const int64_t per_block = blockDim.x / group;
  return {blockIdx.x * per_block + threadIdx.x / group, gridDim.x * per_block, static_cast<int>(threadIdx.x % group)};
}

// SGLang's translate_loc_to_scratch for one loc: page_pos[loc / ps] * ps + loc % ps, or -1 for a negative loc or a
// page past page_pos.
__device__ __forceinline__ int64_t TranslateOne(int64_t loc, const int32_t* page_pos, int64_t n_page_pos, int64_t ps) {
  if (loc < 0) return -1;
  const int64_t page = loc / ps;
  if (page >= n_page_pos) return -1;
  return int64_t{page_pos[page]} * ps + loc % ps;
}

// Zero-fills one row.
template <typename V>
__device__ __forceinline__ void ZeroRow(V* __restrict__ dst, int64_t vecs, int lane, int group) {
  for (int64_t v = lane; v < vecs; v += group) dst[v] = V{};
}

// Dispatches `f.template operator()<kBytes>()` on the runtime vector width.
template <typename F>
void DispatchVector(int vec_bytes, F&& f) {
  switch (vec_bytes) {
    case 16: f.template operator()<16>(); break;
    case 8: f.template operator()<8>(); break;
    case 4: f.template operator()<4>(); break;
    case 2: f.template operator()<2>(); break;
    default: f.template operator()<1>(); break;
  }
}

// Programmatic dependent launch (sm_90 and later; no-ops before): a kernel launched with LaunchOverlap::
// kProgrammatic calls WaitForPreviousGrid before it reads what the kernel before it on the stream wrote (it waits
// for that grid's completion and memory flush); a kernel that lets its successor start early calls
// AllowNextGrid (the successor still waits in WaitForPreviousGrid).
__device__ __forceinline__ void WaitForPreviousGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void AllowNextGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Launches kernel<<<grid, threads, shared_bytes, stream>>>(args...), with programmatic stream serialization when
// `overlap` asks for it and the device supports it (compute capability 9.0 and later), else as a plain launch.
template <typename... Params, typename... Args>
cudaError_t LaunchWithOverlap(void (*kernel)(Params...), unsigned grid, unsigned threads, size_t shared_bytes,
                              cudaStream_t stream, bool overlap, Args&&... args) {
  static const bool supported = [] {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    return major >= 9;
  }();
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  if (overlap && supported) {
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// Blocks for a persistent grid covering `work` groups of `group` threads with `threads` per block.
int PersistentBlocks(int64_t work, int group, int threads);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_ROW_COPY_CUH_
