// CP (context-parallel) batch split plan value types, field for field SGLang's dataclasses
// (nsa/utils.py: PageAlignedInSeqSplitInfo, CPSharedKVBatchPlan, NSAContextParallelMetadata). No CUDA,
// no JSON: the reference model and the GPU kernels consume these same structs.
#ifndef KVSHARD_CORE_CP_PLAN_H_
#define KVSHARD_CORE_CP_PLAN_H_

#include <cstdint>
#include <array>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace kvshard {

using Int64List = std::vector<int64_t>;

// A fixed-width row-major table (one row per request): row q is values[q*width, (q+1)*width). Flat by
// construction so kernels can take `values` as is; SGLang's List[List[int]] of equal-length rows.
struct Int64Table {
  int64_t width = 0;
  Int64List values;

  // Builds a table from rows of equal length (for tests and small literals).
  static Int64Table FromRows(const std::vector<Int64List>& rows);
  int64_t rows() const { return width == 0 ? 0 : static_cast<int64_t>(values.size()) / width; }
  bool empty() const { return values.empty(); }
  std::span<const int64_t> operator[](int64_t q) const {
    return {values.data() + q * width, static_cast<size_t>(width)};
  }
  std::span<int64_t> operator[](int64_t q) { return {values.data() + q * width, static_cast<size_t>(width)}; }
  // The rows as nested lists (SGLang's shape).
  std::vector<Int64List> ToRows() const;
  bool operator==(const Int64Table&) const = default;
};

// Page metadata of one request's in-seq split (valid tokens; page units cover the physical pages).
struct PageAlignedInSeqSplitInfo {
  bool page_aligned = false;          // false: the token-balanced fallback was used
  int64_t page_size = 1;              // ps
  int64_t extend_prefix_len = 0;      // cached prefix tokens before the extend (page-aligned)
  Int64List segment_page_starts;      // absolute first page of each of the 2N segments
  Int64List segment_page_ends;        // absolute end page (exclusive) of each segment
  int64_t extend_valid_tokens = 0;    // real extend tokens
  int64_t extend_padded_pages = 0;    // ceil(extend / ps)
  int64_t extend_padded_tokens = 0;   // padded_pages * ps
  int64_t extend_padding_tokens = 0;  // padded_tokens - valid_tokens (the last page's empty tail)
};

// (start, length) row span inside a rank's local compute rows of one request (SGLang's tuple).
struct RowSpan {
  int64_t start = 0;
  int64_t length = 0;
  bool operator==(const RowSpan&) const = default;
};

// The per-request page-aligned in-seq plan of a real batch (build_batch_page_aligned_in_seq_split_plan).
// B = batch_size, N = cp_size, S = 2N segments per request; rank r computes segments r and 2N-1-r.
// Fields marked "rank-specific" depend on cp_rank; every other field is identical on all ranks.
struct CPSharedKVBatchPlan {
  int64_t batch_size = 0;                  // B
  int64_t page_size = 1;                   // ps
  int64_t cp_size = 1;                     // N
  int64_t cp_rank = 0;                     // r (rank-specific)
  Int64List request_token_offsets;         // exclusive prefix sums of extend lens (input rows)
  Int64List request_padded_token_offsets;  // exclusive prefix sums of request_padded_tokens
  Int64List request_page_offsets;          // exclusive prefix sums of request_padded_pages
  Int64List request_extend_lens;           // valid tokens per request
  Int64List request_prefix_lens;           // page-aligned cached prefix per request
  Int64List request_padded_pages;          // ceil(extend / ps)
  Int64List request_padded_tokens;         // padded_pages * ps
  Int64List request_padding_tokens;        // padded_tokens - extend
  // request_split_infos: derived, see RequestSplitInfo() (every field of it is stored below).
  Int64Table request_split_lists;             // valid split: S token counts per request
  Int64Table request_zigzag_indices;          // [r, 2N-1-r] per request (rank-specific)
  Int64Table request_segment_page_starts;     // valid segment first pages (absolute)
  Int64Table request_segment_page_ends;       // valid segment end pages (absolute, exclusive)
  Int64List request_rank_local_tokens;        // valid rows of this rank per request (rank-specific)
  Int64List request_rank_local_offsets;       // exclusive prefix sums of the above (rank-specific)
  Int64List request_kv_len_prev;              // inclusive valid prefix sum at segment r (rank-specific)
  Int64List request_kv_len_next;              // inclusive valid prefix sum at segment 2N-1-r (rank-specific)
  Int64List request_actual_seq_q_prev;        // COMPUTE split[r] (rank-specific)
  Int64List request_actual_seq_q_next;        // COMPUTE split[2N-1-r] (rank-specific)
  Int64List request_last_token_owner;         // rank holding the last valid token (from the compute split)
  Int64List request_last_token_local_offset;  // its row within the owner's request-local compute rows
  std::string output_collect_mode = "narrow_last_token";  // always "narrow_last_token"
  Int64List flat_zigzag_index;                            // req*S + [r, 2N-1-r] per request (rank-specific)
  Int64List flat_segment_request_ids;                     // request id of each flat segment
  Int64List flat_segment_offsets;                         // request-local exclusive prefix sums of the valid split
  bool compute_padding_enabled = false;       // any request with compute padded tokens != valid padded tokens
  Int64List request_valid_actual_seq_q_prev;  // valid split[r] (rank-specific)
  Int64List request_valid_actual_seq_q_next;  // valid split[2N-1-r] (rank-specific)
  std::vector<std::array<RowSpan, 2>> request_valid_query_row_spans;  // [(0, v[r]), (c[r], v[2N-1-r])] (rank-specific)
  Int64Table request_compute_split_lists;          // compute split: full page units, max(pages, N) units
  Int64Table request_compute_segment_page_starts;  // compute segment first pages (absolute)
  Int64Table request_compute_segment_page_ends;    // compute segment end pages (absolute, exclusive)
  Int64List request_compute_padded_pages;          // max(padded_pages, N)
  Int64List request_compute_padded_tokens;         // compute_padded_pages * ps
  Int64List request_compute_padding_tokens;        // compute_padded_tokens - extend
  Int64List request_compute_padded_token_offsets;  // exclusive prefix sums of compute padded tokens
  Int64List request_compute_rank_local_tokens;     // compute rows of this rank per request (rank-specific)
  Int64List request_compute_rank_local_offsets;    // exclusive prefix sums of the above (rank-specific)

  // Fields SGLang stores as copies of the fields above; here they share storage (same values, no copy).
  const Int64List& flat_split_list() const { return request_split_lists.values; }
  const Int64Table& request_valid_split_lists() const { return request_split_lists; }
  const Int64Table& request_valid_segment_page_starts() const { return request_segment_page_starts; }
  const Int64Table& request_valid_segment_page_ends() const { return request_segment_page_ends; }
  const Int64List& request_valid_padded_pages() const { return request_padded_pages; }
  const Int64List& request_valid_padded_tokens() const { return request_padded_tokens; }
  const Int64List& request_valid_padding_tokens() const { return request_padding_tokens; }
  const Int64List& request_valid_rank_local_tokens() const { return request_rank_local_tokens; }
  const Int64List& request_valid_rank_local_offsets() const { return request_rank_local_offsets; }
  const Int64List& request_valid_seq_q_prev() const { return request_valid_actual_seq_q_prev; }
  const Int64List& request_valid_seq_q_next() const { return request_valid_actual_seq_q_next; }
  const Int64List& request_compute_actual_seq_q_prev() const { return request_actual_seq_q_prev; }
  const Int64List& request_compute_actual_seq_q_next() const { return request_actual_seq_q_next; }
  const Int64List& request_compute_seq_q_prev() const { return request_actual_seq_q_prev; }
  const Int64List& request_compute_seq_q_next() const { return request_actual_seq_q_next; }
};

// SGLang's request_split_infos[q]: the PageAlignedInSeqSplitInfo of request q (page_aligned is true in
// every plan the builder returns; the fallback is an error there).
PageAlignedInSeqSplitInfo RequestSplitInfo(const CPSharedKVBatchPlan& plan, int64_t q);

// NSAContextParallelMetadata without device tensors: the scalar (bs=1) fields and the communication
// sizes; a *_tensor field holds the values SGLang copies to the device.
struct NSAContextParallelMetadata {
  Int64List split_list;                   // communication split of request 0 (scalar consumers)
  Int64List split_list_tensor;            // flat communication splits of all requests
  Int64List split_prefix_tensor;          // exclusive prefix sums of split_list_tensor
  Int64List max_rank_len;                 // N copies of max_rank_token
  Int64List zigzag_index;                 // [r, 2N-1-r]
  Int64List per_rank_actual_token;        // communication rows of each rank
  Int64List reverse_split_len;            // [s0, s_{2N-1}, s1, s_{2N-2}, ...] of split_list
  Int64List cp_reverse_index;             // gathered segment order -> request order
  int64_t kv_len_prev = -1;               // inclusive valid prefix sum at segment r
  int64_t kv_len_next = -1;               // inclusive valid prefix sum at segment 2N-1-r
  int64_t actual_seq_q_prev = -1;         // split_list[r]
  int64_t actual_seq_q_next = -1;         // split_list[2N-1-r]
  Int64List actual_seq_q_prev_cu_tensor;  // [0, actual_seq_q_prev]
  Int64List actual_seq_q_next_cu_tensor;  // [0, actual_seq_q_next]
  int64_t total_seq_lens = 0;             // max_rank_token * N (the padded all-gather rows)
  PageAlignedInSeqSplitInfo info;         // page_aligned .. extend_padding_tokens of request 0
  int64_t batch_size = 1;                 // B
  std::shared_ptr<const CPSharedKVBatchPlan>
      batch_plan;                                 // set when built from a plan (request_* fields are its fields)
  Int64List request_actual_seq_q_prev_cu_tensor;  // [0] + inclusive prefix sums of request_actual_seq_q_prev
  Int64List request_actual_seq_q_next_cu_tensor;  // [0] + inclusive prefix sums of request_actual_seq_q_next
  // max_rank_len[0], or 0 when empty.
  int64_t max_rank_token() const { return max_rank_len.empty() ? 0 : max_rank_len[0]; }
};

// Which split a flat table describes: `valid` (cache writes) or `compute` (model inputs).
enum class SplitKind { kCompute, kValid };

// Flat int64 tables of one split kind for kernels: B*S segment lengths, request-local segment offsets,
// per-request input row offsets and target (padded) lengths, and this rank's local row offsets.
struct FlatSplitTables {
  int64_t batch_size = 0;       // B
  int64_t segments = 0;         // S = 2N
  Int64List split_lens;         // B*S: split[q][s]
  Int64List segment_offsets;    // B*S: request-local exclusive prefix sums of split[q]
  Int64List input_row_offsets;  // B+1: exclusive prefix sums of request_extend_lens (input rows)
  Int64List target_lens;        // B: rows each request is padded to before splitting
  Int64List target_offsets;     // B+1: exclusive prefix sums of target_lens
  Int64List local_row_offsets;  // B+1: this rank's local rows of request q start here
};

// The tables for splitting by `plan` with `kind`, using SGLang's choice: compute split and compute padded
// lengths only when kind is compute and compute_padding_enabled, else the valid split and extend lens.
FlatSplitTables FlattenSplitTables(const CPSharedKVBatchPlan& plan, SplitKind kind);

// Rank-major rerange tables for `split_lists` (one 2N list per request): rank_request_offsets[r*B+q] is
// where request q's rows start inside rank r's block; per_rank_tokens[r] is the block's row count.
struct RerangeTables {
  int64_t cp_size = 0;
  int64_t batch_size = 0;
  Int64List rank_request_offsets;  // N*B
  Int64List per_rank_tokens;       // N
};

// Builds RerangeTables (the offsets of SGLang's _torch_batch_in_seq_all_gather_rerange).
RerangeTables BuildRerangeTables(const Int64Table& split_lists, int64_t cp_size);

}  // namespace kvshard

#endif  // KVSHARD_CORE_CP_PLAN_H_
