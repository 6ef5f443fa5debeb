// The pool row movers of ranks emulated on one device, one launch for every rank (a grid row per rank's job):
// LaunchGatherRowsRanks (packs), LaunchPackAllGatherRanks (packs and the emulated all-gather), LaunchWriteChunkRanks
// (chunk staging and owner scatter, of rows in memory or made where they are written), LaunchTranslateGatherRanks
// (reads). Each does what the per-rank launches of kv_ops.cu do, job by job.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/payload.h"
#include "gpu/kv_ops.h"
#include "gpu/nvtx.h"
#include "gpu/row_copy.cuh"
#include "gpu/write_plans.cuh"

namespace kvshard::gpu {
namespace {

constexpr int kThreads = 256;

// The jobs of LaunchGatherRowsRanks and LaunchTranslateGatherRanks, passed by value (blockIdx.y picks one).
struct GatherRowsJobs {
  GatherRowsJob job[kMaxRankJobs];
};
struct WriteChunkJobs {
  WriteChunkJob job[kMaxRankJobs];
};
struct TranslateGatherJobs {
  TranslateGatherJob job[kMaxRankJobs];
};

template <typename V>
__global__ void GatherRowsRanksKernel(GatherRowsJobs jobs, int64_t n, int64_t vecs, int group) {
  const GatherRowsJob& job = jobs.job[blockIdx.y];
  const GroupPos g = MyGroup(group);
  const auto* in = static_cast<const V*>(job.in);
  auto* out = static_cast<V*>(job.out);
  for (int64_t i = g.id; i < n; i += g.count) {
    const int64_t src = job.index[i];
    if (src < 0 || src >= job.in_rows) {
      if (job.bad && g.lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(job.bad), 1ull);
      continue;
    }
    CopyRow(out + i * vecs, in + src * vecs, vecs, g.lane, group);
  }
}

// LaunchPackAllGatherRanks's sources and destinations, by value.
struct PackAllGatherArgs {
  PackSource source[kMaxRankJobs];
  void* out[kMaxRankJobs];
};

// Destination q's copy of every source's packed rows, by the calling grid row: item s * n + k is source s's send row k.
template <typename V>
__device__ __forceinline__ void PackAllGatherInto(const PackAllGatherArgs& args, int q, int sources, int64_t n,
                                                  int64_t vecs, int group) {
  const GroupPos g = MyGroup(group);
  auto* out = static_cast<V*>(args.out[q]);
  for (int64_t item = g.id; item < sources * n; item += g.count) {
    const int s = static_cast<int>(item / n);
    const PackSource& src = args.source[s];
    const int64_t row = src.index[item - s * n];
    if (row < 0 || row >= src.in_rows) {
      if (src.bad && q == s && g.lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(src.bad), 1ull);
      continue;
    }
    CopyRow(out + item * vecs, static_cast<const V*>(src.in) + row * vecs, vecs, g.lane, group);
  }
}

template <typename V>
__global__ void PackAllGatherRanksKernel(PackAllGatherArgs args, int sources, int64_t n, int64_t vecs, int group) {
  PackAllGatherInto<V>(args, static_cast<int>(blockIdx.y), sources, n, vecs, group);
}

// LaunchBatchStartRanks's plans and packs, by value (about 3.6 KB: under the 4 KB every CUDA version takes).
struct BatchStartArgs {
  WritePlansArgs plans;
  PackAllGatherArgs pack[kMaxBatchStartPacks];
  int plan_count;
  int packs;
  int sources[kMaxBatchStartPacks];  // pack k's sources
  int outs[kMaxBatchStartPacks];     // pack k's destinations: its grid rows
};
static_assert(sizeof(BatchStartArgs) <= 4000, "kernel parameters past 4 KB");

// Grid rows [0, plan_count): plan y, built by the row's first block (kThreads threads); then pack k's destinations,
// one grid row each, in pack order.
template <typename V>
__global__ void BatchStartRanksKernel(BatchStartArgs a, int64_t n, int64_t vecs, int group) {
  int y = static_cast<int>(blockIdx.y);
  if (y < a.plan_count) {
    if (blockIdx.x == 0) BuildWritePlanBlock<kThreads>(a.plans, y);
    return;
  }
  y -= a.plan_count;
  int k = 0;
  while (k + 1 < a.packs && y >= a.outs[k]) y -= a.outs[k++];
  PackAllGatherInto<V>(a.pack[k], y, a.sources[k], n, vecs, group);
}

// Where WriteChunkRanksKernel's rows come from: memory (jobs[j].rows) ...
struct RowsInMemory {
  template <typename V>
  __device__ __forceinline__ void Put(V* dst, const WriteChunkJob& job, int64_t i, int64_t vecs, int lane,
                                      int group) const {
    CopyRow(dst, static_cast<const V*>(job.rows) + i * vecs, vecs, lane, group);
  }
  __device__ __forceinline__ void Mark(int64_t) const {}
};

// ... or made where they are written: bytes [offset, offset + row bytes) of the payload row of
// (layer, chunk_locs[i], generation), as MakePayloadKernel cuts them (byte q is byte q % 4 of word q / 4).
struct RowsMade {
  uint64_t seed, layer_hash;
  int64_t generation, offset;
  uint32_t* mark;  // ChunkPayload's: the generation table the rows' slots are marked in (null: none)
  int64_t mark_slots;
  __device__ __forceinline__ void Mark(int64_t loc) const {
    if (mark != nullptr && loc >= 0 && loc < mark_slots) mark[loc] = static_cast<uint32_t>(generation);
  }
  template <typename V>
  __device__ __forceinline__ void Put(V* dst, const WriteChunkJob& job, int64_t i, int64_t vecs, int lane,
                                      int group) const {
    const uint64_t hash = PayloadSlotHash(seed, layer_hash, job.chunk_locs[i]);
    for (int64_t v = lane; v < vecs; v += group) {
      union {
        V vec;
        uint8_t bytes[sizeof(V)];
        uint32_t words[sizeof(V) >= 4 ? sizeof(V) / 4 : 1];
      } u;
      const int64_t q0 = offset + v * static_cast<int64_t>(sizeof(V));
      if (sizeof(V) >= 4 && q0 % 4 == 0) {
#pragma unroll
        for (int k = 0; k < static_cast<int>(sizeof(V) / 4); ++k)
          u.words[k] = PayloadWordOf(hash, generation, q0 / 4 + k);
      } else {
#pragma unroll
        for (int k = 0; k < static_cast<int>(sizeof(V)); ++k) {
          const int64_t q = q0 + k;
          u.bytes[k] = static_cast<uint8_t>(PayloadWordOf(hash, generation, q / 4) >> (8 * (q % 4)));
        }
      }
      dst[v] = u.vec;
    }
  }
};

// blockIdx.y < jobs: job y's chunk staging (StageChunkKernel's loop); else job y - jobs's scatter
// (ScatterRowsKernel's). Row i of a job comes from `rows` (RowsInMemory or RowsMade).
template <typename V, typename Rows>
__global__ void WriteChunkRanksKernel(WriteChunkJobs jobs, int jobs_count, int64_t n, int64_t ps, int64_t vecs,
                                      int group, Rows rows) {
  const bool stage = static_cast<int>(blockIdx.y) < jobs_count;
  const WriteChunkJob& job = jobs.job[stage ? blockIdx.y : blockIdx.y - jobs_count];
  const GroupPos g = MyGroup(group);
  if (stage) {
    auto* scratch = static_cast<V*>(job.scratch);
    const bool marks = blockIdx.y == 0;  // job 0 marks the rows' slots (every job has the same chunk locs)
    for (int64_t i = g.id; i < n; i += g.count) {
      if (marks && g.lane == 0) rows.Mark(job.chunk_locs[i]);
      const int64_t row = TranslateOne(job.chunk_locs[i], job.page_pos, job.n_page_pos, ps);
      if (row < 0 || row >= job.scratch_rows) {
        if (job.bad && g.lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(job.bad), 1ull);
        continue;
      }
      rows.template Put<V>(scratch + row * vecs, job, i, vecs, g.lane, group);
    }
    return;
  }
  auto* pool = static_cast<V*>(job.pool);
  const int64_t c = *job.owned_count;
  const int64_t count = c < n ? c : n;
  for (int64_t j = g.id; j < count; j += g.count) {
    const int64_t s = job.owned_idx[j], d = job.local_rows[j];
    if (s < 0 || s >= n || d < 0 || d >= job.pool_rows) {
      if (job.bad && g.lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(job.bad), 1ull);
      continue;
    }
    rows.template Put<V>(pool + d * vecs, job, s, vecs, g.lane, group);
  }
}

template <typename V>
__global__ void TranslateGatherRanksKernel(TranslateGatherJobs jobs, const int64_t* __restrict__ locs, int64_t n,
                                           int64_t ps, int64_t vecs, int group) {
  const TranslateGatherJob& job = jobs.job[blockIdx.y];
  const GroupPos g = MyGroup(group);
  const auto* in = static_cast<const V*>(job.in);
  auto* out = static_cast<V*>(job.out);
  for (int64_t i = g.id; i < n; i += g.count) {
    const int64_t src = TranslateOne(locs[i], job.page_pos, job.n_page_pos, ps);
    if (src < 0 || src >= job.in_rows) continue;
    CopyRow(out + i * vecs, in + src * vecs, vecs, g.lane, group);
  }
}

}  // namespace

namespace {

// The widest vector (16, 8, 4, 2 or 1 bytes) dividing `bits` (a row size or'ed with every address it moves).
int WidestVector(uint64_t bits) {
  for (int v = 16; v > 1; v /= 2) {
    if (bits % v == 0) return v;
  }
  return 1;
}

// Checks what every launcher checks: at most kMaxRankJobs jobs, n >= 0.
Status CheckJobs(size_t jobs, int64_t n) {
  if (jobs > static_cast<size_t>(kMaxRankJobs)) {
    return InvalidArgument("jobs: at most ", kMaxRankJobs, " in one launch, got ", jobs);
  }
  if (n < 0) return InvalidArgument("n: must be >= 0, got ", n);
  return Status::Ok();
}

// Calls launch.template operator()<V>(grid, vecs, group) for the vector type of vec_bytes, with `grid_rows` grid rows
// of about the blocks one gather of all their rows would take, shared out among them.
template <typename Launch>
void LaunchOverRanks(int vec_bytes, int64_t row_bytes, int64_t n, int grid_rows, Launch&& launch) {
  DispatchVector(vec_bytes, [&]<int kB>() {
    using V = typename VecOf<kB>::T;
    const int64_t vecs = row_bytes / kB;
    const int group = GroupSizeFor(vecs);
    const int per_row = std::max(1, PersistentBlocks(n * grid_rows, group, kThreads) / grid_rows);
    launch.template operator()<V>(dim3(static_cast<unsigned>(per_row), static_cast<unsigned>(grid_rows)), vecs, group);
  });
}

}  // namespace

Status LaunchGatherRowsRanks(const std::vector<GatherRowsJob>& jobs, int64_t n, int64_t row_bytes,
                             cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.kv.gather_rows_ranks");
  KVSHARD_RETURN_IF_ERROR(CheckJobs(jobs.size(), n));
  GatherRowsJobs packed;
  uint64_t bits = static_cast<uint64_t>(row_bytes);
  for (size_t j = 0; j < jobs.size(); ++j) {
    KVSHARD_RETURN_IF_ERROR(RowOpCanImplement(n, row_bytes, jobs[j].in_rows, n));
    packed.job[j] = jobs[j];
    bits |= reinterpret_cast<uintptr_t>(jobs[j].out) | reinterpret_cast<uintptr_t>(jobs[j].in);
  }
  if (n == 0 || jobs.empty()) return Status::Ok();
  LaunchOverRanks(WidestVector(bits), row_bytes, n, static_cast<int>(jobs.size()),
                  [&]<typename V>(dim3 grid, int64_t vecs, int group) {
                    GatherRowsRanksKernel<V><<<grid, kThreads, 0, stream>>>(packed, n, vecs, group);
                  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchPackAllGatherRanks(const std::vector<PackSource>& sources, const std::vector<void*>& outs, int64_t n,
                                int64_t row_bytes, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.kv.pack_all_gather_ranks");
  KVSHARD_RETURN_IF_ERROR(CheckJobs(std::max(sources.size(), outs.size()), n));
  PackAllGatherArgs args{};
  uint64_t bits = static_cast<uint64_t>(row_bytes);
  for (size_t s = 0; s < sources.size(); ++s) {
    KVSHARD_RETURN_IF_ERROR(RowOpCanImplement(n, row_bytes, sources[s].in_rows, n));
    args.source[s] = sources[s];
    bits |= reinterpret_cast<uintptr_t>(sources[s].in);
  }
  for (size_t q = 0; q < outs.size(); ++q) {
    args.out[q] = outs[q];
    bits |= reinterpret_cast<uintptr_t>(outs[q]);
  }
  const int64_t items = n * static_cast<int64_t>(sources.size());
  if (items == 0 || outs.empty()) return Status::Ok();
  const int count = static_cast<int>(sources.size());
  LaunchOverRanks(WidestVector(bits), row_bytes, items, static_cast<int>(outs.size()),
                  [&]<typename V>(dim3 grid, int64_t vecs, int group) {
                    PackAllGatherRanksKernel<V><<<grid, kThreads, 0, stream>>>(args, count, n, vecs, group);
                  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchBatchStartRanks(const int64_t* locs, int64_t n, const PlacementSpec& spec,
                             const std::vector<WritePlanOut>& plans, const std::vector<PackAllGatherJob>& packs,
                             int64_t pack_rows, int64_t row_bytes, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.kv.batch_start_ranks");
  if (n < 0 || n > kMaxWritePlansLocs) return InvalidArgument("n: must be in [0, ", kMaxWritePlansLocs, "], got ", n);
  KVSHARD_RETURN_IF_ERROR(ValidatePlacementSpec(spec));
  if (plans.size() > static_cast<size_t>(kMaxPlansPerLaunch)) {
    return InvalidArgument("plans: at most ", kMaxPlansPerLaunch, " in one launch, got ", plans.size());
  }
  if (packs.size() > static_cast<size_t>(kMaxBatchStartPacks)) {
    return InvalidArgument("packs: at most ", kMaxBatchStartPacks, " in one launch, got ", packs.size());
  }
  BatchStartArgs a{};
  a.plans.locs = locs;
  a.plans.n = n;
  a.plans.lps = spec.logical_page_size();
  a.plans.ps = spec.page_size;
  for (size_t k = 0; k < plans.size(); ++k) {
    KVSHARD_RETURN_IF_ERROR(ValidateRank(plans[k].rank, spec.shard_size));
    a.plans.rank[k] = plans[k].rank;
    a.plans.owned_idx[k] = plans[k].owned_idx;
    a.plans.local_rows[k] = plans[k].local_rows;
    a.plans.count[k] = plans[k].count;
  }
  a.plan_count = static_cast<int>(plans.size());
  KVSHARD_RETURN_IF_ERROR(RowOpCanImplement(pack_rows, row_bytes, 0, pack_rows));
  uint64_t bits = static_cast<uint64_t>(row_bytes);
  int rows = a.plan_count, widest = 1;  // grid rows; the most sources of a pack
  for (const PackAllGatherJob& job : packs) {
    KVSHARD_RETURN_IF_ERROR(CheckJobs(std::max(job.sources.size(), job.outs.size()), pack_rows));
    PackAllGatherArgs& args = a.pack[a.packs];
    args = PackAllGatherArgs{};
    for (size_t s = 0; s < job.sources.size(); ++s) {
      KVSHARD_RETURN_IF_ERROR(RowOpCanImplement(pack_rows, row_bytes, job.sources[s].in_rows, pack_rows));
      args.source[s] = job.sources[s];
      bits |= reinterpret_cast<uintptr_t>(job.sources[s].in);
    }
    for (size_t q = 0; q < job.outs.size(); ++q) {
      args.out[q] = job.outs[q];
      bits |= reinterpret_cast<uintptr_t>(job.outs[q]);
    }
    if (pack_rows == 0 || job.sources.empty() || job.outs.empty()) continue;  // nothing to move: no grid rows
    a.sources[a.packs] = static_cast<int>(job.sources.size());
    a.outs[a.packs] = static_cast<int>(job.outs.size());
    widest = std::max(widest, a.sources[a.packs]);
    rows += a.outs[a.packs];
    ++a.packs;
  }
  if (rows == 0) return Status::Ok();
  LaunchOverRanks(WidestVector(bits), row_bytes, pack_rows * widest, rows,
                  [&]<typename V>(dim3 grid, int64_t vecs, int group) {
                    BatchStartRanksKernel<V><<<grid, kThreads, 0, stream>>>(a, pack_rows, vecs, group);
                  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchWriteChunkRanks(const std::vector<WriteChunkJob>& jobs, int64_t n, int64_t page_size, int64_t row_bytes,
                             cudaStream_t stream, const ChunkPayload* made) {
  KVSHARD_NVTX_RANGE("kvshard.kv.write_chunk_ranks");
  KVSHARD_RETURN_IF_ERROR(CheckJobs(jobs.size(), n));
  if (page_size < 1) return InvalidArgument("page_size: must be >= 1, got ", page_size);
  if (made != nullptr && made->offset < 0) return InvalidArgument("made.offset: must be >= 0, got ", made->offset);
  WriteChunkJobs packed;
  uint64_t bits = static_cast<uint64_t>(row_bytes);
  for (size_t j = 0; j < jobs.size(); ++j) {
    KVSHARD_RETURN_IF_ERROR(RowOpCanImplement(n, row_bytes, n, jobs[j].scratch_rows));
    KVSHARD_RETURN_IF_ERROR(RowOpCanImplement(n, row_bytes, n, jobs[j].pool_rows));
    packed.job[j] = jobs[j];
    bits |= reinterpret_cast<uintptr_t>(jobs[j].scratch) | reinterpret_cast<uintptr_t>(jobs[j].pool);
    if (made == nullptr) bits |= reinterpret_cast<uintptr_t>(jobs[j].rows);
  }
  if (n == 0 || jobs.empty()) return Status::Ok();
  const int ranks = static_cast<int>(jobs.size());
  LaunchOverRanks(WidestVector(bits), row_bytes, n, 2 * ranks, [&]<typename V>(dim3 grid, int64_t vecs, int group) {
    if (made == nullptr) {
      WriteChunkRanksKernel<V><<<grid, kThreads, 0, stream>>>(packed, ranks, n, page_size, vecs, group, RowsInMemory{});
    } else {
      const RowsMade rows{made->seed,       Mix64(static_cast<uint64_t>(made->layer)),
                          made->generation, made->offset,
                          made->mark,       made->mark_slots};
      WriteChunkRanksKernel<V><<<grid, kThreads, 0, stream>>>(packed, ranks, n, page_size, vecs, group, rows);
    }
  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchTranslateGatherRanks(const std::vector<TranslateGatherJob>& jobs, const int64_t* locs, int64_t n,
                                  int64_t page_size, int64_t row_bytes, cudaStream_t stream) {
  KVSHARD_NVTX_RANGE("kvshard.kv.translate_gather_ranks");
  KVSHARD_RETURN_IF_ERROR(CheckJobs(jobs.size(), n));
  if (page_size < 1) return InvalidArgument("page_size: must be >= 1, got ", page_size);
  TranslateGatherJobs packed;
  uint64_t bits = static_cast<uint64_t>(row_bytes);
  for (size_t j = 0; j < jobs.size(); ++j) {
    KVSHARD_RETURN_IF_ERROR(RowOpCanImplement(n, row_bytes, std::max<int64_t>(jobs[j].in_rows, 0), n));
    packed.job[j] = jobs[j];
    bits |= reinterpret_cast<uintptr_t>(jobs[j].out) | reinterpret_cast<uintptr_t>(jobs[j].in);
  }
  if (n == 0 || jobs.empty()) return Status::Ok();
  LaunchOverRanks(WidestVector(bits), row_bytes, n, static_cast<int>(jobs.size()),
                  [&]<typename V>(dim3 grid, int64_t vecs, int group) {
                    TranslateGatherRanksKernel<V>
                        <<<grid, kThreads, 0, stream>>>(packed, locs, n, page_size, vecs, group);
                  });
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace kvshard::gpu
