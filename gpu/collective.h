// The shard group's collectives behind one small interface: NCCL with one GPU per rank (one process driving
// all local GPUs, or one process per GPU under mpirun) and an emulated group (device copies, N ranks on one
// GPU; for tests only, never for a performance figure). Host-safe header.
#ifndef KVSHARD_GPU_COLLECTIVE_H_
#define KVSHARD_GPU_COLLECTIVE_H_

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "gpu/stream.h"

namespace kvshard::gpu {

// A group of size() ranks; this process drives local_ranks() (all of them, or one under MPI).
// Vectors passed to collectives are indexed like local_ranks().
class RankGroup {
 public:
  virtual ~RankGroup() = default;
  // "nccl", "nccl-mpi" or "emulated".
  virtual std::string Kind() const = 0;
  // N, the number of ranks.
  virtual int size() const = 0;
  // Ranks driven by this process, ascending.
  virtual const std::vector<int>& local_ranks() const = 0;
  // CUDA device of local rank `i` (an index into local_ranks()).
  virtual int device(int i) const = 0;
  // In-place all-gather: bufs[i] holds size()*bytes bytes, and its block local_ranks()[i] is the contribution.
  virtual Status AllGatherInPlace(const std::vector<void*>& bufs, size_t bytes,
                                  const std::vector<cudaStream_t>& streams) = 0;
  // All-gather of `bytes` per rank from send[i] into recv[i] (size()*bytes), rank-major.
  virtual Status AllGather(const std::vector<const void*>& send, const std::vector<void*>& recv, size_t bytes,
                           const std::vector<cudaStream_t>& streams) = 0;
};

// One process, devices 0..n-1 (ncclCommInitAll; collectives issued inside ncclGroupStart/End).
StatusOr<std::unique_ptr<RankGroup>> CreateNcclGroup(int n);

// n single-rank groups over devices 0..n-1 (comms of one ncclCommInitAll), one per host thread: each thread
// drives its own GPU as one process per GPU would, with no cross-device group calls.
StatusOr<std::vector<std::unique_ptr<RankGroup>>> CreateNcclPerRankGroups(int n);

// NCCL's 128-byte unique id, made by rank 0 and shared (e.g. MPI_Bcast) before CreateNcclRankGroup.
using NcclId = std::array<char, 128>;
// A fresh unique id (rank 0 calls this).
StatusOr<NcclId> NewNcclId();
// This process's rank of an n-rank group on CUDA device `device` (ncclCommInitRank).
StatusOr<std::unique_ptr<RankGroup>> CreateNcclRankGroup(const NcclId& id, int rank, int n, int device);

// n ranks emulated on one device by device-to-device copies with full barriers around each collective.
StatusOr<std::unique_ptr<RankGroup>> CreateEmulatedGroup(int n, int device);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_COLLECTIVE_H_
