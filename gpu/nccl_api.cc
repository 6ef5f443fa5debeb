// dlopen/dlsym binding of the NCCL entry points (see nccl_api.h); the house pattern of cli/mpi_world.cc.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "gpu/nccl_api.h"

namespace kvshard::gpu {
namespace {

constexpr int kMinVersion = 21400;  // ncclConfig_t.blocking and ncclInProgress

template <typename Fn>
bool Bind(void* lib, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return *fn != nullptr;
}

}  // namespace

StatusOr<NcclApi> LoadNccl(const std::string& library) {
  dlerror();
  // RTLD_LOCAL: NCCL's symbols stay out of the global scope; its own plugins are found by NCCL itself.
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    return Unavailable("NCCL: cannot load ", library, " (", e ? e : "not found",
                       "); install NCCL 2 or set KVSHARD_NCCL_LIBRARY to its libnccl.so.2");
  }
  NcclApi api;
  api.library = library;
  if (!Bind(lib, "ncclGetVersion", &api.GetVersion) || !Bind(lib, "ncclGetUniqueId", &api.GetUniqueId) ||
      !Bind(lib, "ncclCommInitRankConfig", &api.CommInitRankConfig) ||
      !Bind(lib, "ncclCommDestroy", &api.CommDestroy) || !Bind(lib, "ncclCommAbort", &api.CommAbort) ||
      !Bind(lib, "ncclCommGetAsyncError", &api.CommGetAsyncError) || !Bind(lib, "ncclGroupStart", &api.GroupStart) ||
      !Bind(lib, "ncclGroupEnd", &api.GroupEnd) || !Bind(lib, "ncclAllGather", &api.AllGather) ||
      !Bind(lib, "ncclGetErrorString", &api.GetErrorString)) {
    const char* e = dlerror();
    dlclose(lib);
    return Unavailable("NCCL: ", library, " lacks a function kvshard needs (", e ? e : "?", ")");
  }
  if (api.GetVersion(&api.version) != ncclSuccess || api.version < kMinVersion) {
    dlclose(lib);
    return Unavailable("NCCL: ", library, " is version ", api.version, "; kvshard needs NCCL >= 2.14");
  }
  return api;  // the library stays loaded for the process's lifetime
}

StatusOr<const NcclApi*> Nccl() {
  static std::once_flag once;
  static StatusOr<NcclApi>* loaded = nullptr;  // never destroyed: NCCL calls may run during exit
  std::call_once(once, [] {
    const char* env = std::getenv("KVSHARD_NCCL_LIBRARY");
    if (env && *env) {
      loaded = new StatusOr<NcclApi>(LoadNccl(env));
      return;
    }
    loaded = new StatusOr<NcclApi>(LoadNccl("libnccl.so.2"));
#ifdef KVSHARD_NCCL_FALLBACK_DIR
    if (!loaded->ok() && sizeof(KVSHARD_NCCL_FALLBACK_DIR) > 1) {
      StatusOr<NcclApi> fallback = LoadNccl(KVSHARD_NCCL_FALLBACK_DIR "/libnccl.so.2");
      if (fallback.ok()) *loaded = std::move(fallback);
    }
#endif
  });
  if (!loaded->ok()) return loaded->status();
  return &loaded->value();
}

}  // namespace kvshard::gpu
