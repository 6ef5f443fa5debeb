// NCCL and emulated RankGroup implementations. Every wait is a poll loop with a deadline (Waiter): NCCL
// communicators are nonblocking, so comm set-up and ncclGroupEnd return at once and are polled with
// ncclCommGetAsyncError, and stream completion is polled with cudaStreamQuery; on timeout the group aborts.
// Host code (the C++ toolchain, not nvcc): the emulated group's kernels are gpu/stall_kernel.cu and
// gpu/copy_blocks.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "gpu/collective.h"
#include "gpu/copy_blocks.h"
#include "gpu/nccl_api.h"
#include "gpu/nvtx.h"
#include "gpu/stall_kernel.h"

namespace kvshard::gpu {
namespace {

// An NCCL call through the loaded API -> Status; ncclInProgress counts as success (nonblocking communicators).
#define KVSHARD_NCCL_API_CHECK(api, expr)                                                                            \
  do {                                                                                                               \
    ncclResult_t kvshard_nccl_res_ = (expr);                                                                         \
    if (kvshard_nccl_res_ != ncclSuccess && kvshard_nccl_res_ != ncclInProgress) {                                   \
      return ::kvshard::Internal(__FILE__, ":", __LINE__, ": NCCL error ", (api)->GetErrorString(kvshard_nccl_res_), \
                                 " in `" #expr "`");                                                                 \
    }                                                                                                                \
  } while (0)

// Runs `issue` (NCCL calls) between ncclGroupStart and ncclGroupEnd. ncclGroupEnd runs even when `issue` fails,
// so this thread's NCCL group depth stays balanced; the first error is returned.
template <typename Issue>
Status NcclGroupCall(const NcclApi* api, Issue issue) {
  KVSHARD_NCCL_API_CHECK(api, api->GroupStart());
  const Status issued = issue();
  if (!issued.ok()) {
    api->GroupEnd();
    return issued;
  }
  KVSHARD_NCCL_API_CHECK(api, api->GroupEnd());
  return Status::Ok();
}

std::string RankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

// State and waits shared by both groups: the timeout, the last collective (for the error's context) and the
// abort. Subclasses supply Poll (NCCL's asynchronous errors; per local rank: done or not) and Abort.
class Waiter : public RankGroup {
 public:
  Waiter(std::string kind, int n, std::vector<int> ranks, int64_t timeout_ms)
      : kind_(std::move(kind)), n_(n), ranks_(std::move(ranks)), timeout_ms_(timeout_ms) {}
  std::string Kind() const override { return kind_; }
  int size() const override { return n_; }
  const std::vector<int>& local_ranks() const override { return ranks_; }
  int64_t timeout_ms() const override { return timeout_ms_; }
  bool aborted() const override { return !abort_reason_.empty(); }
  void set_wait_style(WaitStyle style) override { wait_style_ = style; }

  Status Synchronize(const std::vector<cudaStream_t>& streams) override {
    KVSHARD_NVTX_RANGE("kvshard.collective.synchronize");
    KVSHARD_RETURN_IF_ERROR(CheckArgs(streams.size(), streams.size()));
    std::vector<int> idx(streams.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
    return WaitStreams(idx, streams);
  }
  Status SynchronizeRank(int i, cudaStream_t stream) override {
    KVSHARD_NVTX_RANGE("kvshard.collective.synchronize");
    if (i < 0 || i >= static_cast<int>(ranks_.size())) {
      return InvalidArgument("collective: local rank index ", i, " out of [0, ", ranks_.size(), ")");
    }
    return WaitStreams({i}, {stream});
  }

 protected:
  // NCCL's state of local rank i's communicator: OK + true when idle, OK + false while in progress, or its error.
  virtual StatusOr<bool> CommIdle(int i) = 0;
  // Stops whatever the group left on the device (ncclCommAbort, or releasing the stalled rank).
  virtual void AbortDevice() = 0;

  Status CheckArgs(size_t a, size_t b) const {
    if (a != ranks_.size() || b != ranks_.size()) {
      return InvalidArgument("collective: expected ", ranks_.size(), " local buffers and streams, got ", a, " and ", b);
    }
    return Status::Ok();
  }
  // Fails at once when an earlier wait aborted the group, else records `op` for the errors of later waits.
  Status Begin(const char* op, size_t bytes) {
    if (aborted()) return Unavailable("collective ", op, ": the ", kind_, " group was aborted: ", abort_reason_);
    op_ = op;
    bytes_ = bytes;
    return Status::Ok();
  }
  // Polls until every listed local rank's communicator is idle (set-up or a group call done).
  Status WaitComms() {
    std::vector<int> idx(ranks_.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
    return Wait(idx, [&](int i) { return CommIdle(i); });
  }
  Status WaitStreams(const std::vector<int>& idx, const std::vector<cudaStream_t>& streams) {
    if (aborted()) return Unavailable("collective wait: the ", kind_, " group was aborted: ", abort_reason_);
    std::vector<cudaStream_t> by_rank(ranks_.size(), nullptr);
    for (size_t k = 0; k < idx.size(); ++k) by_rank[idx[k]] = streams[k];
    return Wait(idx, [&](int i) -> StatusOr<bool> {
      KVSHARD_RETURN_IF_ERROR(CommIdle(i).status());  // an NCCL error surfaces while the stream waits on it
      const cudaError_t e = cudaStreamQuery(by_rank[i]);
      if (e == cudaErrorNotReady) return false;
      KVSHARD_CUDA_CHECK(e);
      return true;
    });
  }

 private:
  // The poll loop: `done(i)` for each pending local rank until none is pending, one fails (abort, its error with
  // context) or the deadline passes (abort, Unavailable with context). Pauses between polls as wait_style_ says.
  template <typename Done>
  Status Wait(std::vector<int> pending, Done done) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::milliseconds(timeout_ms_);
    WaitBackoff backoff(wait_style_);
    for (;;) {
      std::vector<int> still;
      for (int i : pending) {
        StatusOr<bool> d = done(i);
        if (!d.ok()) {
          return Fail(Status(d.status().code(),
                             StrCat("collective ", op_, " (", bytes_, " bytes per rank) on ", kind_, " rank ",
                                    ranks_[i], " of ", n_, ": ", d.status().message(), "; group aborted")));
        }
        if (!*d) still.push_back(i);
      }
      if (still.empty()) return Status::Ok();
      pending = std::move(still);
      if (std::chrono::steady_clock::now() >= deadline) {
        std::vector<int> waiting;
        for (int i : pending) waiting.push_back(ranks_[i]);
        return Fail(Unavailable("collective timeout: ", op_, " (", bytes_, " bytes per rank) on the ", kind_,
                                " group of ", n_, " ranks: rank(s) ", RankList(waiting), " not complete after ",
                                timeout_ms_,
                                " ms (KVSHARD_COLLECTIVE_TIMEOUT_MS); a peer stalled or died; group "
                                "aborted"));
      }
      const std::chrono::microseconds pause =
          backoff.Next(std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start));
      if (pause.count() == 0) {
        std::this_thread::yield();
      } else {
        Nap(pause);
      }
    }
  }
  Status Fail(Status s) {
    abort_reason_ = s.message();
    AbortDevice();
    return s;
  }

  std::string kind_;
  int n_;
  std::vector<int> ranks_;
  int64_t timeout_ms_;
  std::string op_ = "communicator set-up";
  size_t bytes_ = 0;
  std::string abort_reason_;
  WaitStyle wait_style_ = WaitStyle::kEager;
};

class NcclGroup : public Waiter {
 public:
  NcclGroup(const NcclApi* api, std::string kind, int n, std::vector<int> ranks, std::vector<int> devices,
            std::vector<ncclComm_t> comms, int64_t timeout_ms)
      : Waiter(std::move(kind), n, std::move(ranks), timeout_ms),
        api_(api),
        devices_(std::move(devices)),
        comms_(std::move(comms)) {}
  ~NcclGroup() override {
    if (aborted()) return;  // ncclCommAbort already freed the communicators
    for (ncclComm_t c : comms_) {
      if (c) api_->CommDestroy(c);
    }
  }
  int device(int i) const override { return devices_[i]; }
  // Waits for the communicators' set-up (nonblocking init) with the group's deadline.
  Status WaitInit() { return WaitComms(); }

  Status AllGatherInPlace(const std::vector<void*>& bufs, size_t bytes,
                          const std::vector<cudaStream_t>& streams) override {
    KVSHARD_NVTX_RANGE("kvshard.collective.all_gather_in_place");
    KVSHARD_RETURN_IF_ERROR(CheckArgs(bufs.size(), streams.size()));
    KVSHARD_RETURN_IF_ERROR(Begin("all_gather_in_place", bytes));
    return GroupAllGather(bytes, streams, [&](size_t i) {
      char* base = static_cast<char*>(bufs[i]);
      return std::pair<const void*, void*>(base + local_ranks()[i] * bytes, base);
    });
  }

  Status AllGather(const std::vector<const void*>& send, const std::vector<void*>& recv, size_t bytes,
                   const std::vector<cudaStream_t>& streams) override {
    KVSHARD_NVTX_RANGE("kvshard.collective.all_gather");
    KVSHARD_RETURN_IF_ERROR(CheckArgs(send.size(), streams.size()));
    KVSHARD_RETURN_IF_ERROR(CheckArgs(recv.size(), streams.size()));
    KVSHARD_RETURN_IF_ERROR(Begin("all_gather", bytes));
    return GroupAllGather(bytes, streams, [&](size_t i) { return std::pair<const void*, void*>(send[i], recv[i]); });
  }

 protected:
  StatusOr<bool> CommIdle(int i) override {
    ncclResult_t state = ncclSuccess;
    KVSHARD_NCCL_API_CHECK(api_, api_->CommGetAsyncError(comms_[i], &state));
    if (state == ncclInProgress) return false;
    if (state != ncclSuccess) return Internal("NCCL asynchronous error ", api_->GetErrorString(state));
    return true;
  }
  void AbortDevice() override {
    for (ncclComm_t c : comms_) {
      if (c) api_->CommAbort(c);
    }
  }

 private:
  // One ncclAllGather of `bytes` per local communicator (buffers(i) -> {send, recv}) in one group call, then the
  // wait, under the group's deadline, until NCCL has taken them all.
  template <typename Buffers>
  Status GroupAllGather(size_t bytes, const std::vector<cudaStream_t>& streams, Buffers buffers) {
    KVSHARD_RETURN_IF_ERROR(NcclGroupCall(api_, [&]() -> Status {
      for (size_t i = 0; i < comms_.size(); ++i) {
        const auto [send, recv] = buffers(i);
        KVSHARD_NCCL_API_CHECK(api_, api_->AllGather(send, recv, bytes, ncclChar, comms_[i], streams[i]));
      }
      return Status::Ok();
    }));
    return WaitComms();
  }

  const NcclApi* api_;
  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
};

class EmulatedGroup : public Waiter {
 public:
  EmulatedGroup(int n, int device, int stalled_rank, int64_t timeout_ms)
      : Waiter("emulated", n, AllRanks(n), timeout_ms), n_(n), device_(device), stalled_(stalled_rank) {}
  ~EmulatedGroup() override {
    if (flag_) {
      *flag_ = 1;  // never leave a stall kernel spinning
      cudaDeviceSynchronize();
      cudaFreeHost(const_cast<int*>(flag_));
    }
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  Status Init() {
    KVSHARD_CUDA_CHECK(cudaSetDevice(device_));
    events_.resize(n_);
    for (auto& e : events_) KVSHARD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    if (stalled_ >= 0) {
      int* flag = nullptr;
      KVSHARD_CUDA_CHECK(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped));
      *flag = 0;
      flag_ = flag;
      KVSHARD_CUDA_CHECK(cudaHostGetDevicePointer(&d_flag_, flag, 0));
    }
    return Status::Ok();
  }
  int device(int) const override { return device_; }

  Status AllGatherInPlace(const std::vector<void*>& bufs, size_t bytes,
                          const std::vector<cudaStream_t>& streams) override {
    KVSHARD_NVTX_RANGE("kvshard.collective.all_gather_in_place");
    KVSHARD_RETURN_IF_ERROR(CheckArgs(bufs.size(), streams.size()));
    KVSHARD_RETURN_IF_ERROR(Begin("all_gather_in_place", bytes));
    std::vector<BlockCopy> copies;
    for (int r = 0; r < n_; ++r) {
      for (int s = 0; s < n_; ++s) {
        if (s != r)
          copies.push_back({static_cast<const char*>(bufs[s]) + s * bytes, static_cast<char*>(bufs[r]) + s * bytes});
      }
    }
    return CopyAfterAll(copies, bytes, streams);
  }

  Status AllGather(const std::vector<const void*>& send, const std::vector<void*>& recv, size_t bytes,
                   const std::vector<cudaStream_t>& streams) override {
    KVSHARD_NVTX_RANGE("kvshard.collective.all_gather");
    KVSHARD_RETURN_IF_ERROR(CheckArgs(send.size(), streams.size()));
    KVSHARD_RETURN_IF_ERROR(CheckArgs(recv.size(), streams.size()));
    KVSHARD_RETURN_IF_ERROR(Begin("all_gather", bytes));
    std::vector<BlockCopy> copies;
    for (int r = 0; r < n_; ++r) {
      for (int s = 0; s < n_; ++s) copies.push_back({send[s], static_cast<char*>(recv[r]) + s * bytes});
    }
    return CopyAfterAll(copies, bytes, streams);
  }

 protected:
  StatusOr<bool> CommIdle(int) override { return true; }
  void AbortDevice() override {
    if (flag_) *flag_ = 1;  // the stalled rank "arrives" so the device drains; the group stays aborted
  }

 private:
  static std::vector<int> AllRanks(int n) {
    std::vector<int> r(n);
    for (int i = 0; i < n; ++i) r[i] = i;
    return r;
  }
  // A collective's data movement, ordered as a real one: the stalled rank's stream first waits for a flag nobody
  // sets; stream 0 waits for every stream's work so far and runs every copy in one launch; every other stream then
  // waits for stream 0 (3 (n - 1) + 2 calls instead of a copy per pair and two full barriers; none between ranks
  // that share one stream).
  Status CopyAfterAll(const std::vector<BlockCopy>& copies, size_t bytes, const std::vector<cudaStream_t>& streams) {
    if (stalled_ >= 0) KVSHARD_RETURN_IF_ERROR(LaunchStall(d_flag_, streams[stalled_]));
    bool one_stream = true;  // every rank on stream 0: program order is the order, no event needed
    for (int r = 1; r < n_; ++r) {
      if (streams[r] == streams[0]) continue;
      one_stream = false;
      KVSHARD_CUDA_CHECK(cudaEventRecord(events_[r], streams[r]));
      KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(streams[0], events_[r], 0));
    }
    KVSHARD_RETURN_IF_ERROR(LaunchCopyBlocks(copies, bytes, streams[0]));
    if (one_stream) return Status::Ok();
    KVSHARD_CUDA_CHECK(cudaEventRecord(events_[0], streams[0]));
    for (int r = 1; r < n_; ++r) {
      if (streams[r] != streams[0]) KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(streams[r], events_[0], 0));
    }
    return Status::Ok();
  }
  int n_, device_, stalled_;
  std::vector<cudaEvent_t> events_;
  volatile int* flag_ = nullptr;  // host view of the stall flag
  int* d_flag_ = nullptr;         // device view
};

StatusOr<int64_t> Timeout(int64_t timeout_ms) {
  if (timeout_ms > 0) return timeout_ms;
  return CollectiveTimeoutMsFromEnv();
}

// What every NCCL factory needs first: the group's deadline and the process's NCCL (loaded on first use).
struct NcclSetup {
  int64_t timeout_ms = 0;
  const NcclApi* api = nullptr;
};
StatusOr<NcclSetup> BeginNcclSetup(int64_t timeout_ms) {
  NcclSetup s;
  KVSHARD_ASSIGN_OR_RETURN(s.timeout_ms, Timeout(timeout_ms));
  KVSHARD_ASSIGN_OR_RETURN(s.api, Nccl());
  return s;
}

StatusOr<ncclUniqueId> UniqueId(const NcclApi* api) {
  ncclUniqueId id;
  KVSHARD_NCCL_API_CHECK(api, api->GetUniqueId(&id));
  return id;
}

// The one place communicators are made: this process's ranks[i] of an n-rank group with unique id `id`, on CUDA
// device devices[i], nonblocking (ncclConfig_t.blocking = 0), all in one group call. The communicators may still
// be setting up on return: the NcclGroup that owns them waits (WaitInit) under its deadline. On an error, the
// ones already made are aborted.
StatusOr<std::vector<ncclComm_t>> InitComms(const NcclApi* api, const ncclUniqueId& id, int n,
                                            const std::vector<int>& ranks, const std::vector<int>& devices) {
  std::vector<ncclComm_t> comms(ranks.size(), nullptr);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const Status made = NcclGroupCall(api, [&]() -> Status {
    for (size_t i = 0; i < ranks.size(); ++i) {
      KVSHARD_CUDA_CHECK(cudaSetDevice(devices[i]));
      KVSHARD_NCCL_API_CHECK(api, api->CommInitRankConfig(&comms[i], n, id, ranks[i], &config));
    }
    return Status::Ok();
  });
  if (!made.ok()) {
    for (ncclComm_t c : comms) {
      if (c) api->CommAbort(c);
    }
    return made;
  }
  return comms;
}

// Every rank of an n-rank group in this process, rank i on device i (CreateNcclGroup, CreateNcclPerRankGroups).
StatusOr<std::vector<ncclComm_t>> InitLocalComms(const NcclApi* api, int n) {
  int visible = 0;
  KVSHARD_CUDA_CHECK(cudaGetDeviceCount(&visible));
  if (n < 1 || n > visible) return Unavailable("nccl group of ", n, " ranks needs ", n, " GPUs, ", visible, " visible");
  KVSHARD_ASSIGN_OR_RETURN(const ncclUniqueId id, UniqueId(api));
  std::vector<int> ranks(n);
  for (int i = 0; i < n; ++i) ranks[i] = i;
  return InitComms(api, id, n, ranks, ranks);
}

}  // namespace

StatusOr<int64_t> CollectiveTimeoutMsFromEnv() {
  const char* v = std::getenv("KVSHARD_COLLECTIVE_TIMEOUT_MS");
  if (!v || !*v) return kDefaultCollectiveTimeoutMs;
  char* end = nullptr;
  errno = 0;
  const long long ms = std::strtoll(v, &end, 10);
  if (*end != '\0' || errno != 0 || ms <= 0) {
    return InvalidArgument("KVSHARD_COLLECTIVE_TIMEOUT_MS: must be a positive integer (milliseconds), got '", v, "'");
  }
  return static_cast<int64_t>(ms);
}

StatusOr<std::unique_ptr<RankGroup>> CreateNcclGroup(int n, int64_t timeout_ms) {
  KVSHARD_NVTX_RANGE("kvshard.collective.init");
  KVSHARD_ASSIGN_OR_RETURN(const NcclSetup s, BeginNcclSetup(timeout_ms));
  KVSHARD_ASSIGN_OR_RETURN(std::vector<ncclComm_t> comms, InitLocalComms(s.api, n));
  std::vector<int> ranks(n);
  for (int i = 0; i < n; ++i) ranks[i] = i;
  auto g = std::make_unique<NcclGroup>(s.api, "nccl", n, ranks, ranks, std::move(comms), s.timeout_ms);
  KVSHARD_RETURN_IF_ERROR(g->WaitInit());
  return std::unique_ptr<RankGroup>(std::move(g));
}

StatusOr<std::vector<std::unique_ptr<RankGroup>>> CreateNcclPerRankGroups(int n, int64_t timeout_ms) {
  KVSHARD_NVTX_RANGE("kvshard.collective.init");
  KVSHARD_ASSIGN_OR_RETURN(const NcclSetup s, BeginNcclSetup(timeout_ms));
  KVSHARD_ASSIGN_OR_RETURN(const std::vector<ncclComm_t> comms, InitLocalComms(s.api, n));
  std::vector<std::unique_ptr<NcclGroup>> groups;
  for (int i = 0; i < n; ++i) {
    groups.emplace_back(new NcclGroup(s.api, "nccl-thread", n, {i}, {i}, {comms[i]}, s.timeout_ms));
  }
  for (auto& g : groups) KVSHARD_RETURN_IF_ERROR(g->WaitInit());
  std::vector<std::unique_ptr<RankGroup>> out;
  for (auto& g : groups) out.push_back(std::move(g));
  return out;
}

namespace {
std::string Describe(const NcclApi& api) {
  return StrCat("NCCL ", api.version / 10000, ".", api.version / 100 % 100, ".", api.version % 100, " (", api.library,
                ")");
}
}  // namespace

StatusOr<std::string> NcclLibrary() {
  KVSHARD_ASSIGN_OR_RETURN(const NcclApi* api, Nccl());
  return Describe(*api);
}

StatusOr<std::string> ProbeNcclLibrary(const std::string& library) {
  KVSHARD_ASSIGN_OR_RETURN(NcclApi api, LoadNccl(library));
  return Describe(api);
}

StatusOr<NcclId> NewNcclId() {
  KVSHARD_ASSIGN_OR_RETURN(const NcclApi* api, Nccl());
  KVSHARD_ASSIGN_OR_RETURN(const ncclUniqueId id, UniqueId(api));
  NcclId out;
  static_assert(sizeof(id.internal) == 128);
  std::memcpy(out.data(), id.internal, out.size());
  return out;
}

StatusOr<std::unique_ptr<RankGroup>> CreateNcclRankGroup(const NcclId& id, int rank, int n, int device,
                                                         int64_t timeout_ms) {
  KVSHARD_NVTX_RANGE("kvshard.collective.init");
  if (n < 1 || rank < 0 || rank >= n) return InvalidArgument("rank: must be in [0, ", n, "), got ", rank);
  KVSHARD_ASSIGN_OR_RETURN(const NcclSetup s, BeginNcclSetup(timeout_ms));
  ncclUniqueId nid;
  std::memcpy(nid.internal, id.data(), id.size());
  KVSHARD_ASSIGN_OR_RETURN(std::vector<ncclComm_t> comms, InitComms(s.api, nid, n, {rank}, {device}));
  auto g = std::make_unique<NcclGroup>(s.api, "nccl-mpi", n, std::vector<int>{rank}, std::vector<int>{device},
                                       std::move(comms), s.timeout_ms);
  KVSHARD_RETURN_IF_ERROR(g->WaitInit());
  return std::unique_ptr<RankGroup>(std::move(g));
}

StatusOr<std::unique_ptr<RankGroup>> CreateEmulatedGroup(int n, int device, int64_t timeout_ms) {
  return CreateEmulatedGroupWithStalledRank(n, device, -1, timeout_ms);
}

StatusOr<std::unique_ptr<RankGroup>> CreateEmulatedGroupWithStalledRank(int n, int device, int stalled_rank,
                                                                        int64_t timeout_ms) {
  if (n < 1 || n > 64) return InvalidArgument("shard_size: emulated group must have 1..64 ranks, got ", n);
  if (stalled_rank >= n) return InvalidArgument("stalled_rank: must be < ", n, ", got ", stalled_rank);
  KVSHARD_ASSIGN_OR_RETURN(const int64_t timeout, Timeout(timeout_ms));
  auto g = std::make_unique<EmulatedGroup>(n, device, stalled_rank, timeout);
  KVSHARD_RETURN_IF_ERROR(g->Init());
  return std::unique_ptr<RankGroup>(std::move(g));
}

}  // namespace kvshard::gpu
