// NCCL and emulated RankGroup implementations.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

#include "gpu/collective.h"

namespace kvshard::gpu {
namespace {

class NcclGroup : public RankGroup {
 public:
  NcclGroup(std::string kind, int n, std::vector<int> ranks, std::vector<int> devices, std::vector<ncclComm_t> comms)
      : kind_(std::move(kind)), n_(n), ranks_(std::move(ranks)), devices_(std::move(devices)), comms_(std::move(comms)) {}
  ~NcclGroup() override {
    for (ncclComm_t c : comms_) ncclCommDestroy(c);
  }
  std::string Kind() const override { return kind_; }
  int size() const override { return n_; }
  const std::vector<int>& local_ranks() const override { return ranks_; }
  int device(int i) const override { return devices_[i]; }

  Status AllGatherInPlace(const std::vector<void*>& bufs, size_t bytes,
                          const std::vector<cudaStream_t>& streams) override {
    KVSHARD_RETURN_IF_ERROR(CheckArgs(bufs.size(), streams.size()));
    KVSHARD_NCCL_CHECK(ncclGroupStart());
    for (size_t i = 0; i < comms_.size(); ++i) {
      char* base = static_cast<char*>(bufs[i]);
      KVSHARD_NCCL_CHECK(ncclAllGather(base + ranks_[i] * bytes, base, bytes, ncclChar, comms_[i], streams[i]));
    }
    KVSHARD_NCCL_CHECK(ncclGroupEnd());
    return Status::Ok();
  }

  Status AllGather(const std::vector<const void*>& send, const std::vector<void*>& recv, size_t bytes,
                   const std::vector<cudaStream_t>& streams) override {
    KVSHARD_RETURN_IF_ERROR(CheckArgs(send.size(), streams.size()));
    KVSHARD_RETURN_IF_ERROR(CheckArgs(recv.size(), streams.size()));
    KVSHARD_NCCL_CHECK(ncclGroupStart());
    for (size_t i = 0; i < comms_.size(); ++i) {
      KVSHARD_NCCL_CHECK(ncclAllGather(send[i], recv[i], bytes, ncclChar, comms_[i], streams[i]));
    }
    KVSHARD_NCCL_CHECK(ncclGroupEnd());
    return Status::Ok();
  }

 private:
  Status CheckArgs(size_t a, size_t b) const {
    if (a != comms_.size() || b != comms_.size()) {
      return InvalidArgument("collective: expected ", comms_.size(), " local buffers and streams, got ", a, " and ", b);
    }
    return Status::Ok();
  }
  std::string kind_;
  int n_;
  std::vector<int> ranks_, devices_;
  std::vector<ncclComm_t> comms_;
};

class EmulatedGroup : public RankGroup {
 public:
  EmulatedGroup(int n, int device) : n_(n), device_(device) {
    for (int r = 0; r < n; ++r) ranks_.push_back(r);
  }
  ~EmulatedGroup() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  Status Init() {
    KVSHARD_CUDA_CHECK(cudaSetDevice(device_));
    events_.resize(n_);
    for (auto& e : events_) KVSHARD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return Status::Ok();
  }
  std::string Kind() const override { return "emulated"; }
  int size() const override { return n_; }
  const std::vector<int>& local_ranks() const override { return ranks_; }
  int device(int) const override { return device_; }

  Status AllGatherInPlace(const std::vector<void*>& bufs, size_t bytes,
                          const std::vector<cudaStream_t>& streams) override {
    KVSHARD_RETURN_IF_ERROR(CheckArgs(bufs.size(), streams.size()));
    KVSHARD_RETURN_IF_ERROR(Barrier(streams));
    for (int r = 0; r < n_; ++r) {
      for (int s = 0; s < n_; ++s) {
        if (s == r || bytes == 0) continue;
        KVSHARD_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(bufs[r]) + s * bytes,
                                           static_cast<const char*>(bufs[s]) + s * bytes, bytes,
                                           cudaMemcpyDeviceToDevice, streams[r]));
      }
    }
    return Barrier(streams);
  }

  Status AllGather(const std::vector<const void*>& send, const std::vector<void*>& recv, size_t bytes,
                   const std::vector<cudaStream_t>& streams) override {
    KVSHARD_RETURN_IF_ERROR(CheckArgs(send.size(), streams.size()));
    KVSHARD_RETURN_IF_ERROR(CheckArgs(recv.size(), streams.size()));
    KVSHARD_RETURN_IF_ERROR(Barrier(streams));
    for (int r = 0; r < n_; ++r) {
      for (int s = 0; s < n_; ++s) {
        if (bytes == 0) continue;
        KVSHARD_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(recv[r]) + s * bytes, send[s], bytes,
                                           cudaMemcpyDeviceToDevice, streams[r]));
      }
    }
    return Barrier(streams);
  }

 private:
  // Every stream waits for every other stream's work so far (what a real collective implies).
  Status Barrier(const std::vector<cudaStream_t>& streams) {
    for (int r = 0; r < n_; ++r) KVSHARD_CUDA_CHECK(cudaEventRecord(events_[r], streams[r]));
    for (int r = 0; r < n_; ++r) {
      for (int s = 0; s < n_; ++s) {
        if (s != r) KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(streams[r], events_[s], 0));
      }
    }
    return Status::Ok();
  }
  Status CheckArgs(size_t a, size_t b) const {
    if (a != static_cast<size_t>(n_) || b != static_cast<size_t>(n_)) {
      return InvalidArgument("collective: expected ", n_, " local buffers and streams, got ", a, " and ", b);
    }
    return Status::Ok();
  }
  int n_, device_;
  std::vector<int> ranks_;
  std::vector<cudaEvent_t> events_;
};

}  // namespace

StatusOr<std::unique_ptr<RankGroup>> CreateNcclGroup(int n) {
  int visible = 0;
  KVSHARD_CUDA_CHECK(cudaGetDeviceCount(&visible));
  if (n < 1 || n > visible) return Unavailable("nccl group of ", n, " ranks needs ", n, " GPUs, ", visible, " visible");
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devices(n), ranks(n);
  for (int i = 0; i < n; ++i) devices[i] = ranks[i] = i;
  KVSHARD_NCCL_CHECK(ncclCommInitAll(comms.data(), n, devices.data()));
  return std::unique_ptr<RankGroup>(new NcclGroup("nccl", n, ranks, devices, comms));
}

StatusOr<std::vector<std::unique_ptr<RankGroup>>> CreateNcclPerRankGroups(int n) {
  int visible = 0;
  KVSHARD_CUDA_CHECK(cudaGetDeviceCount(&visible));
  if (n < 1 || n > visible) return Unavailable("nccl group of ", n, " ranks needs ", n, " GPUs, ", visible, " visible");
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devices(n);
  for (int i = 0; i < n; ++i) devices[i] = i;
  KVSHARD_NCCL_CHECK(ncclCommInitAll(comms.data(), n, devices.data()));
  std::vector<std::unique_ptr<RankGroup>> out;
  for (int i = 0; i < n; ++i) out.emplace_back(new NcclGroup("nccl-thread", n, {i}, {i}, {comms[i]}));
  return out;
}

StatusOr<NcclId> NewNcclId() {
  ncclUniqueId id;
  KVSHARD_NCCL_CHECK(ncclGetUniqueId(&id));
  NcclId out;
  static_assert(sizeof(id.internal) == 128);
  std::memcpy(out.data(), id.internal, out.size());
  return out;
}

StatusOr<std::unique_ptr<RankGroup>> CreateNcclRankGroup(const NcclId& id, int rank, int n, int device) {
  if (n < 1 || rank < 0 || rank >= n) return InvalidArgument("rank: must be in [0, ", n, "), got ", rank);
  ncclUniqueId nid;
  std::memcpy(nid.internal, id.data(), id.size());
  KVSHARD_CUDA_CHECK(cudaSetDevice(device));
  ncclComm_t comm;
  KVSHARD_NCCL_CHECK(ncclCommInitRank(&comm, n, nid, rank));
  return std::unique_ptr<RankGroup>(new NcclGroup("nccl-mpi", n, {rank}, {device}, {comm}));
}

StatusOr<std::unique_ptr<RankGroup>> CreateEmulatedGroup(int n, int device) {
  if (n < 1 || n > 64) return InvalidArgument("shard_size: emulated group must have 1..64 ranks, got ", n);
  auto g = std::make_unique<EmulatedGroup>(n, device);
  KVSHARD_RETURN_IF_ERROR(g->Init());
  return std::unique_ptr<RankGroup>(std::move(g));
}

}  // namespace kvshard::gpu
