// The shard group's collectives behind one small interface: NCCL with one GPU per rank (one process driving
// all local GPUs, or one process per GPU under mpirun) and an emulated group (device copies, N ranks on one
// GPU; for tests only, never for a performance figure). Every wait for a collective's completion polls with a
// deadline (the group's timeout) and aborts the group when it passes (docs/gpu.md). Host-safe header.
#ifndef KVSHARD_GPU_COLLECTIVE_H_
#define KVSHARD_GPU_COLLECTIVE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "gpu/stream.h"
#include "gpu/wait_backoff.h"

namespace kvshard::gpu {

// The collective timeout when none is given: $KVSHARD_COLLECTIVE_TIMEOUT_MS (a positive integer) when set, else
// kDefaultCollectiveTimeoutMs; InvalidArgument naming the variable when it is set but malformed.
constexpr int64_t kDefaultCollectiveTimeoutMs = 300000;
StatusOr<int64_t> CollectiveTimeoutMsFromEnv();

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
  // Waits until every stream (indexed like local_ranks()) has finished its work so far, the last collective
  // included, polling NCCL's asynchronous errors. When timeout_ms() passes first, or NCCL reports an error, the
  // group is aborted (ncclCommAbort; the emulated group releases its stalled rank) and the Status names the last
  // collective, the ranks still waiting, the bytes and the timeout; every later call then fails at once.
  virtual Status Synchronize(const std::vector<cudaStream_t>& streams) = 0;
  // The same for local rank `i`'s stream alone (e.g. a compute stream that waits on the collective's events).
  virtual Status SynchronizeRank(int i, cudaStream_t stream) = 0;
  // The deadline of every wait, in milliseconds.
  virtual int64_t timeout_ms() const = 0;
  // True once a timeout or NCCL error has aborted the group.
  virtual bool aborted() const = 0;
  // How the waits above poll (gpu/wait_backoff.h; kEager unless set): set before the waits it should govern.
  virtual void set_wait_style(WaitStyle style) = 0;
};

// In the factories below, timeout_ms <= 0 means CollectiveTimeoutMsFromEnv(). NCCL groups use nonblocking
// communicators (ncclConfig_t.blocking = 0): communicator set-up is waited for with the same deadline.

// One process, devices 0..n-1 (one ncclCommInitRankConfig per device in a group call; collectives issued inside
// ncclGroupStart/End).
StatusOr<std::unique_ptr<RankGroup>> CreateNcclGroup(int n, int64_t timeout_ms = 0);

// n single-rank groups over devices 0..n-1 (communicators made in one group call), one per host thread: each thread
// drives its own GPU as one process per GPU would, with no cross-device group calls.
StatusOr<std::vector<std::unique_ptr<RankGroup>>> CreateNcclPerRankGroups(int n, int64_t timeout_ms = 0);

// The process's NCCL, loaded on first use ($KVSHARD_NCCL_LIBRARY, else libnccl.so.2): "NCCL 2.28.5 (<library>)",
// or Unavailable naming the library and how to point kvshard at one.
StatusOr<std::string> NcclLibrary();
// The same check for `library` alone, loaded afresh and not kept as the process's NCCL (tests, diagnostics).
StatusOr<std::string> ProbeNcclLibrary(const std::string& library);

// NCCL's 128-byte unique id, made by rank 0 and shared (e.g. MPI_Bcast) before CreateNcclRankGroup.
using NcclId = std::array<char, 128>;
// A fresh unique id (rank 0 calls this).
StatusOr<NcclId> NewNcclId();
// This process's rank of an n-rank group on CUDA device `device` (ncclCommInitRank).
// A rank that never joins makes the others fail after timeout_ms, not hang.
StatusOr<std::unique_ptr<RankGroup>> CreateNcclRankGroup(const NcclId& id, int rank, int n, int device,
                                                         int64_t timeout_ms = 0);

// n ranks emulated on one device: each collective's copies are one launch on rank 0's stream, after every rank's
// stream's work so far and before any rank's next work (the ordering a real collective gives).
StatusOr<std::unique_ptr<RankGroup>> CreateEmulatedGroup(int n, int device, int64_t timeout_ms = 0);

// For tests: an emulated group whose rank `stalled_rank` never arrives. Its contribution to every collective waits
// on a flag in pinned host memory that only the group's abort sets, so a Synchronize after a collective really
// stalls on the device until the timeout turns it into an error.
StatusOr<std::unique_ptr<RankGroup>> CreateEmulatedGroupWithStalledRank(int n, int device, int stalled_rank,
                                                                        int64_t timeout_ms);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_COLLECTIVE_H_
