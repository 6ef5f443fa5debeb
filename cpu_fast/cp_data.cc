// Fast host batch rerange: the copy list from the rank-major rerange tables, then one copy per non-empty
// segment, streamed past the cache when the output is large.
#include "cpu_fast/cp_data.h"

#include <algorithm>
#include <cstring>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KVSHARD_STREAMING_STORES 1
#endif

#include "core/cp_limits.h"

namespace kvshard::fast {
namespace {

// ValidateHostTensor(t, "gathered") (core/host_tensor.h) on the tensor's shape.
Status ValidateGathered(int64_t rows, int64_t row_bytes, size_t bytes) {
  if (row_bytes < 1 || row_bytes > (int64_t{1} << 30)) {
    return InvalidArgument("gathered: row_bytes must be in [1, 2^30], got ", row_bytes);
  }
  if (rows < 0 || rows > (int64_t{1} << 40) / row_bytes || static_cast<int64_t>(bytes) != rows * row_bytes) {
    return InvalidArgument("gathered: data must hold rows * row_bytes bytes (rows=", rows, ", row_bytes=", row_bytes,
                           ", bytes=", bytes, ")");
  }
  return Status::Ok();
}

#ifdef KVSHARD_STREAMING_STORES
// memcpy through 64-byte non-temporal stores. A large rerange is ~1,000 copies, each below glibc memcpy's own
// streaming threshold, so plain memcpy would pull every destination line into the cache before overwriting it
// (the single large memcpy it is compared with streams). Only full-line (64-byte) streaming stores reach the
// single memcpy's bandwidth, hence AVX-512, chosen at run time.
__attribute__((target("avx512f"))) void StreamCopy64(uint8_t* dst, const uint8_t* src, size_t bytes) {
  const size_t head = std::min(bytes, (64 - (reinterpret_cast<uintptr_t>(dst) & 63)) & 63);
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 256 <= bytes; i += 256) {
    _mm_prefetch(reinterpret_cast<const char*>(src + i + 1024), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(src + i + 1024 + 64), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(src + i + 1024 + 128), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(src + i + 1024 + 192), _MM_HINT_T0);
    const __m512i a = _mm512_loadu_si512(src + i), b = _mm512_loadu_si512(src + i + 64);
    const __m512i c = _mm512_loadu_si512(src + i + 128), d = _mm512_loadu_si512(src + i + 192);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), a);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i + 64), b);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i + 128), c);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i + 192), d);
  }
  std::memcpy(dst + i, src + i, bytes - i);
}
#endif

}  // namespace

StatusOr<std::vector<RowCopy>> BatchRerangeCopies(const Int64Table& split_lists, int64_t cp_size,
                                                  int64_t max_rank_token) {
  KVSHARD_ASSIGN_OR_RETURN(const RerangeTables t, CheckedRerangeTables(split_lists, cp_size, max_rank_token));
  std::vector<RowCopy> copies;
  const int64_t batch = t.batch_size;
  int64_t dst = 0;
  for (int64_t q = 0; q < batch; ++q) {
    const std::span<const int64_t> split = split_lists[q];
    for (int64_t s = 0; s < 2 * cp_size; ++s) {
      const bool first_half = s < cp_size;
      const int64_t rank = first_half ? s : 2 * cp_size - s - 1;
      const int64_t src =
          rank * max_rank_token + t.rank_request_offsets[rank * batch + q] + (first_half ? 0 : split[rank]);
      if (split[s] > 0) copies.push_back({src, dst, split[s]});
      dst += split[s];
    }
  }
  return copies;
}

StatusOr<Int64List> BatchRerangeSourceRows(const Int64Table& split_lists, int64_t cp_size, int64_t max_rank_token) {
  KVSHARD_ASSIGN_OR_RETURN(std::vector<RowCopy> copies, BatchRerangeCopies(split_lists, cp_size, max_rank_token));
  Int64List rows;
  for (const RowCopy& c : copies) {
    for (int64_t o = 0; o < c.rows; ++o) rows.push_back(c.src_row + o);
  }
  return rows;
}

StatusOr<std::vector<RowCopy>> BatchRerangeCopiesFor(int64_t rows, int64_t row_bytes, size_t bytes,
                                                     const NSAContextParallelMetadata& m, int64_t cp_size) {
  KVSHARD_RETURN_IF_ERROR(ValidateGathered(rows, row_bytes, bytes));
  KVSHARD_ASSIGN_OR_RETURN(const int64_t max_rank_token, CheckBatchRerangeInput(rows, m, cp_size));
  return BatchRerangeCopies(m.batch_plan->request_split_lists, cp_size, max_rank_token);
}

void CopyRowRuns(const std::vector<RowCopy>& copies, const uint8_t* src, int64_t row_bytes, uint8_t* dst,
                 size_t dst_bytes) {
  const size_t width = static_cast<size_t>(row_bytes);
#ifdef KVSHARD_STREAMING_STORES
  static const bool kAvx512 = __builtin_cpu_supports("avx512f");
  if (kAvx512 && dst_bytes >= kStreamingCopyBytes) {
    for (const RowCopy& c : copies) StreamCopy64(dst + c.dst_row * width, src + c.src_row * width, c.rows * width);
    _mm_sfence();
    return;
  }
#endif
  for (const RowCopy& c : copies) std::memcpy(dst + c.dst_row * width, src + c.src_row * width, c.rows * width);
}

}  // namespace kvshard::fast
