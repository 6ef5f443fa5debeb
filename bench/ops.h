// The individual GPU benchmarks behind RunGpuBench, one source file each; every one verifies its result and
// appends its rows to c.rows. Host-safe header, private to the bench package.
#ifndef KVSHARD_BENCH_OPS_H_
#define KVSHARD_BENCH_OPS_H_

#include <cstdint>

#include "bench/bench_util.h"
#include "core/status.h"

namespace kvshard::bench {

// Limit: device-to-device cudaMemcpyAsync of `bytes` on GPU 0; records c.copy_busbw[bytes] (copy_bench.cc).
Status BenchCopy(BenchContext& c, int64_t bytes);
// Limit: raw in-place ncclAllGather of `bytes` per rank over c.gpus GPUs; records c.allgather_busbw[bytes]
// (allgather_bench.cc).
Status BenchAllGather(BenchContext& c, int64_t bytes);
// index_select gather (send-row packing) of `bytes` in shuffled row order, vs the copy (gather_rows_bench.cc).
Status BenchGatherRows(BenchContext& c, int64_t bytes);
// Owner-filtered pool write for rank 0 of N = 8, with the cached write plan and fused (owner_write_bench.cc).
Status BenchOwnerWrite(BenchContext& c, int64_t bytes);
// Chunk staging into the scratch slot through page_pos, vs the copy (stage_chunk_bench.cc).
Status BenchStageChunk(BenchContext& c, int64_t bytes);
// CP batch rerange (cp = 8): the fused kernel and one cudaMemcpyAsync per segment, vs the copy
// (rerange_bench.cc).
Status BenchRerange(BenchContext& c, int64_t bytes);
// Device gather-plan build of c.opt.batch requests, checked against the reference plan (plan_bench.cc).
Status BenchPlan(BenchContext& c);
// Layer-ahead prefix gather over c.gpus GPUs vs the raw all-gather, and its overlap with a compute stand-in
// (prefix_gather_bench.cc).
Status BenchPrefixGather(BenchContext& c, int64_t bytes);

}  // namespace kvshard::bench

#endif  // KVSHARD_BENCH_OPS_H_
