// The processes of an mpirun launch, reached through Open MPI's libmpi loaded at run time (dlopen), so the
// kvshard binary has no load-time MPI dependency and starts on machines without MPI.
#ifndef KVSHARD_CLI_MPI_WORLD_H_
#define KVSHARD_CLI_MPI_WORLD_H_

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace kvshard::cli {

// MPI_COMM_WORLD of this launch: rank, size, and gathering strings to rank 0.
class MpiWorld {
 public:
  // True when an MPI launcher started this process (Open MPI's OMPI_COMM_WORLD_SIZE or PMIx's PMIX_RANK set).
  static bool Launched();
  // Processes of this launch on this host (OMPI_COMM_WORLD_LOCAL_SIZE; 1 when unknown).
  static int LocalSize();
  // Loads libmpi ($KVSHARD_LIBMPI when set, else libmpi.so.40 or libmpi.so) and initializes MPI; Unavailable when the
  // library cannot be loaded or is not Open MPI's, Internal when MPI_Init fails.
  static StatusOr<std::unique_ptr<MpiWorld>> Init();
  ~MpiWorld();  // MPI_Finalize
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Collective: every rank's `mine` arrives at rank 0 in rank order (MPI_Gather of the lengths, then
  // MPI_Gatherv); other ranks get an empty vector.
  StatusOr<std::vector<std::string>> GatherToRoot(const std::string& mine);

 private:
  struct Api;
  explicit MpiWorld(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
  int rank_ = 0, size_ = 1;
};

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_MPI_WORLD_H_
