// MpiWorld over dlopen'ed Open MPI: its handles (MPI_Comm, MPI_Datatype) are pointers to exported globals
// (MPI_COMM_WORLD is &ompi_mpi_comm_world), so the few calls used here are typed with void* handles.
#include "cli/mpi_world.h"

#include <dlfcn.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kvshard::cli {

struct MpiWorld::Api {
  void* lib = nullptr;
  void* comm_world = nullptr;  // &ompi_mpi_comm_world
  void* mpi_char = nullptr;    // &ompi_mpi_char
  void* mpi_int = nullptr;     // &ompi_mpi_int
  int (*init_thread)(int*, char***, int, int*) = nullptr;
  int (*finalize)() = nullptr;
  int (*comm_rank)(void*, int*) = nullptr;
  int (*comm_size)(void*, int*) = nullptr;
  int (*gather)(const void*, int, void*, void*, int, void*, int, void*) = nullptr;
  int (*gatherv)(const void*, int, void*, void*, const int*, const int*, void*, int, void*) = nullptr;
  int (*ibarrier)(void*, void**) = nullptr;    // MPI_Request is a pointer in Open MPI
  int (*test)(void**, int*, void*) = nullptr;  // status: MPI_STATUS_IGNORE (null)
};

namespace {

constexpr int kMpiSuccess = 0;
constexpr int kMpiThreadFunneled = 1;  // only the main thread calls MPI (the sweep's workers never do)

template <typename Fn>
bool Bind(void* lib, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return *fn != nullptr;
}

}  // namespace

bool MpiWorld::Launched() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

int MpiWorld::LocalSize() {
  const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int n = v ? std::atoi(v) : 1;
  return n > 0 ? n : 1;
}

StatusOr<std::unique_ptr<MpiWorld>> MpiWorld::Init() {
  auto api = std::make_unique<Api>();
  std::string tried, why;
  std::vector<std::string> names;
  if (const char* path = std::getenv("KVSHARD_LIBMPI")) {
    names.push_back(path);
  } else {
    names = {"libmpi.so.40", "libmpi.so"};
  }
  for (const std::string& name : names) {
    // RTLD_GLOBAL: Open MPI's plugins resolve libmpi's symbols through the global scope.
    api->lib = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (api->lib) break;
    tried += (tried.empty() ? "" : ", ") + name;
    const char* e = dlerror();
    why = e ? e : "not found";
  }
  if (!api->lib) {
    return Unavailable("--sweep: started by mpirun but cannot load Open MPI's libmpi (tried ", tried, ": ", why,
                       "); install Open MPI or set KVSHARD_LIBMPI to its libmpi.so");
  }
  api->comm_world = dlsym(api->lib, "ompi_mpi_comm_world");
  api->mpi_char = dlsym(api->lib, "ompi_mpi_char");
  api->mpi_int = dlsym(api->lib, "ompi_mpi_int");
  if (!api->comm_world || !api->mpi_char || !api->mpi_int) {
    return Unavailable(
        "--sweep: the libmpi loaded is not Open MPI's (no ompi_mpi_comm_world); kvshard's MPI "
        "sweep supports Open MPI only");
  }
  if (!Bind(api->lib, "MPI_Init_thread", &api->init_thread) || !Bind(api->lib, "MPI_Finalize", &api->finalize) ||
      !Bind(api->lib, "MPI_Comm_rank", &api->comm_rank) || !Bind(api->lib, "MPI_Comm_size", &api->comm_size) ||
      !Bind(api->lib, "MPI_Gather", &api->gather) || !Bind(api->lib, "MPI_Gatherv", &api->gatherv) ||
      !Bind(api->lib, "MPI_Ibarrier", &api->ibarrier) || !Bind(api->lib, "MPI_Test", &api->test)) {
    return Unavailable("--sweep: libmpi lacks an MPI function: ", dlerror());
  }
  int provided = 0;
  if (api->init_thread(nullptr, nullptr, kMpiThreadFunneled, &provided) != kMpiSuccess) {
    return Internal("--sweep: MPI_Init_thread failed");
  }
  std::unique_ptr<MpiWorld> world(new MpiWorld(std::move(api)));
  if (world->api_->comm_rank(world->api_->comm_world, &world->rank_) != kMpiSuccess ||
      world->api_->comm_size(world->api_->comm_world, &world->size_) != kMpiSuccess) {
    return Internal("--sweep: MPI_Comm_rank/MPI_Comm_size failed");
  }
  return world;
}

MpiWorld::MpiWorld(std::unique_ptr<Api> api) : api_(std::move(api)) {}

MpiWorld::~MpiWorld() {
  // The library stays loaded: Open MPI does not support being unloaded and initialized again.
  if (api_ && api_->finalize) api_->finalize();
}

StatusOr<std::vector<std::string>> MpiWorld::GatherToRoot(const std::string& mine) {
  if (mine.size() > static_cast<size_t>(INT_MAX)) return Internal("--sweep: rank ", rank_, "'s rows exceed 2 GiB");
  // Ranks that finish early wait here sleeping: Open MPI's blocking collectives busy-poll, which would take a
  // core from the ranks still simulating on the same host.
  void* barrier = nullptr;
  if (api_->ibarrier(api_->comm_world, &barrier) != kMpiSuccess) return Internal("--sweep: MPI_Ibarrier failed");
  for (int done = 0; !done;) {
    if (api_->test(&barrier, &done, nullptr) != kMpiSuccess) return Internal("--sweep: MPI_Test failed");
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(rank_ == 0 ? size_ : 0);
  if (api_->gather(&length, 1, api_->mpi_int, lengths.data(), 1, api_->mpi_int, 0, api_->comm_world) != kMpiSuccess) {
    return Internal("--sweep: MPI_Gather of the row lengths failed");
  }
  std::vector<int> offsets(lengths.size());
  long long total = 0;
  for (size_t p = 0; p < lengths.size(); ++p) {
    offsets[p] = static_cast<int>(total);
    total += lengths[p];
    if (total > INT_MAX) return Internal("--sweep: the gathered rows exceed 2 GiB");
  }
  std::string all(static_cast<size_t>(total), '\0');
  if (api_->gatherv(mine.data(), length, api_->mpi_char, all.data(), lengths.data(), offsets.data(), api_->mpi_char, 0,
                    api_->comm_world) != kMpiSuccess) {
    return Internal("--sweep: MPI_Gatherv of the rows failed");
  }
  std::vector<std::string> parts;
  for (size_t p = 0; p < lengths.size(); ++p) parts.push_back(all.substr(offsets[p], lengths[p]));
  return parts;
}

}  // namespace kvshard::cli
