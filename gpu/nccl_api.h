// NCCL loaded on first use: the entry points kvshard calls, resolved with dlsym from libnccl.so.2, so the binary
// has no load-time dependency on NCCL (nccl.h supplies the types only). Needs the CUDA toolkit's headers (nccl.h).
#ifndef KVSHARD_GPU_NCCL_API_H_
#define KVSHARD_GPU_NCCL_API_H_

#include <nccl.h>

#include <string>

#include "core/status.h"

namespace kvshard::gpu {

// The NCCL functions used by gpu/collective.cc, bound from one dlopen'ed library.
struct NcclApi {
  std::string library;  // the path or soname that was loaded
  int version = 0;      // ncclGetVersion, e.g. 22805
  ncclResult_t (*GetVersion)(int*) = nullptr;
  ncclResult_t (*GetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*CommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*CommAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
  ncclResult_t (*GroupStart)() = nullptr;
  ncclResult_t (*GroupEnd)() = nullptr;
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) = nullptr;
  const char* (*GetErrorString)(ncclResult_t) = nullptr;
};

// Loads and binds `library` (a path or soname) afresh; Unavailable naming the library and dlerror() when it cannot
// be loaded, lacks a function, or is older than NCCL 2.14 (nonblocking communicators).
StatusOr<NcclApi> LoadNccl(const std::string& library);

// The process's NCCL, loaded once: $KVSHARD_NCCL_LIBRARY when set, else libnccl.so.2 (the dynamic loader's search,
// then the CUDA toolkit's lib64 found at build time). The failure is remembered and returned on every call.
StatusOr<const NcclApi*> Nccl();

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_NCCL_API_H_
