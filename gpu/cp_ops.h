// GPU data movement of CP prefill (spec §4-5): the batch rerange (device-built segment table and row index, then
// an index gather), plan-driven segment gathers (split-by-plan, valid-row selection), round-robin split/restore,
// last tokens.
// Host-safe launch API; `bad` (optional device counter) counts rows skipped for inconsistent metadata.
#ifndef KVSHARD_GPU_CP_OPS_H_
#define KVSHARD_GPU_CP_OPS_H_

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "gpu/stream.h"

namespace kvshard::gpu {

// Checks the rerange's arguments: batch >= 1, cp_size as the reference accepts it, batch * 2cp segments within
// kMaxCpSegments (the reference's bound) and sane row sizes. No request, row or segment limit below those.
Status BatchRerangeCanImplement(int64_t batch, int64_t cp, int64_t max_rank_token, int64_t row_bytes);

// Device scratch bytes the rerange needs: its segment table (2 * batch * 2cp + 1 int64 words) and the
// per-row source index (total_rows int64 words).
size_t BatchRerangeTempBytes(int64_t batch, int64_t cp, int64_t total_rows);

// The batch rerange on `stream`. Up to 6,144 segments (batch x 2cp) it is one launch, RerangeDirectKernel: every
// block scans the device split table into the whole segment table in shared memory, then copies its rows. Past
// that, three launches: RerangeTableKernel derives every segment's output row and gathered source row (scans; no
// host-built index), RerangeIndexKernel expands it into one source row per output row, and LaunchGatherRows
// copies the rows.
// `gathered` is the rank-major all-gather buffer (cp blocks of max_rank_token rows; rank r's block holds, per
// request, its valid segment r then 2cp-1-r); `splits` is the device array of the valid split lists (batch x 2cp,
// request-major). out[i] = gathered[src(i)] in request order, total_rows = sum(splits). `temp` holds
// BatchRerangeTempBytes(batch, cp, total_rows) bytes (the one-launch path leaves it unused) and must stay untouched
// until the launches complete.
Status LaunchBatchRerange(void* out, const void* gathered, const int64_t* splits, int64_t batch, int64_t cp,
                          int64_t max_rank_token, int64_t total_rows, int64_t row_bytes, int64_t* bad, void* temp,
                          size_t temp_bytes, cudaStream_t stream);
// The rerange's two halves, for a table built once per batch and reused by every layer's rerange (the split
// lists are per batch): the table and row index into `temp`, and the index gather reading them.
Status LaunchBuildRerangeTable(const int64_t* splits, int64_t batch, int64_t cp, int64_t max_rank_token,
                               int64_t total_rows, int64_t* bad, void* temp, size_t temp_bytes, cudaStream_t stream);
Status LaunchRerangeFromTable(void* out, const void* gathered, const void* table, int64_t batch, int64_t cp,
                              int64_t max_rank_token, int64_t total_rows, int64_t row_bytes, cudaStream_t stream);
// The same with the scratch taken from the device's stream-ordered pool (cudaMallocAsync / cudaFreeAsync).
Status LaunchBatchRerange(void* out, const void* gathered, const int64_t* splits, int64_t batch, int64_t cp,
                          int64_t max_rank_token, int64_t total_rows, int64_t row_bytes, int64_t* bad,
                          cudaStream_t stream);

// How SegmentGather fills rows past a segment's valid length.
enum class PadMode {
  kZero,      // zero rows (data / 1d modes)
  kPosition,  // int64 positions continuing the request's last valid position by +1 (position mode)
};

// SegmentGatherKernel: for k < segments and o < out_start[k+1]-out_start[k]:
//   out[out_start[k]+o] = o < valid_len[k] ? in[src_start[k]+o] : pad,
// with position pads = in[last_row[k]] + 1 + pad_offset[k] + (o - valid_len[k]). out_start has segments+1
// entries (exclusive prefix, out_start[segments] = output rows). Used for split-by-plan and valid-row selection.
Status LaunchSegmentGather(void* out, const void* in, int64_t in_rows, const int64_t* out_start,
                           const int64_t* src_start, const int64_t* valid_len, const int64_t* last_row,
                           const int64_t* pad_offset, int64_t segments, int64_t out_rows, int64_t row_bytes,
                           PadMode pad, int64_t* bad, cudaStream_t stream);

// RoundRobinSplitKernel: rank `rank` keeps tokens rank, rank+cp, ... of `tokens` rows.
Status LaunchRoundRobinSplit(void* out, const void* in, int64_t tokens, int64_t cp, int64_t rank, int64_t row_bytes,
                             cudaStream_t stream);

// RoundRobinRestoreKernel: out = in.view(cp, rows_per_rank, ...).transpose(0, 1) (all-gathered -> token order).
Status LaunchRoundRobinRestore(void* out, const void* in, int64_t cp, int64_t rows_per_rank, int64_t row_bytes,
                               cudaStream_t stream);

// LastTokenKernel: out[q] = owner[q] == rank ? hidden[row[q]] : zeros, for q < batch (row = rank-local offset +
// local offset of the request's last token).
Status LaunchCollectLastToken(void* out, const void* hidden, int64_t hidden_rows, const int64_t* owner,
                              const int64_t* row, int64_t batch, int64_t rank, int64_t row_bytes, int64_t* bad,
                              cudaStream_t stream);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_CP_OPS_H_
