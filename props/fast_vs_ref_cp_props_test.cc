// cpu_fast/'s CP batch planner and batch rerange against the reference's (cpu_ref/), bit for bit: on random valid,
// edge and corrupted CP batches, every rank's plan (fresh and into a reused plan), the rerange's copy lists, source
// rows and reranged tensors, or the same error (code and message, fail-fast tag and reason).
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/cp_limits.h"
#include "core/cp_plan_json.h"
#include "core/host_tensor.h"
#include "core/spec.h"
#include "cpu_fast/cp_data.h"
#include "cpu_fast/cp_split.h"
#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_split.h"
#include "props/cp_generators.h"
#include "props/fast_vs_ref_testing.h"
#include "props/property.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

// A CP batch case of several requests (the batch rerange's domain), or of one a quarter of the time.
CPBatchCase DrawRerangeCase() {
  const auto several = [](const CPBatchCase& c) { return c.extend_lens.size() > 1; };
  return *rc::gen::weightedOneOf<CPBatchCase>(
      {{1, GenCPBatchCase()}, {3, rc::gen::suchThat(GenCPBatchCase(), several)}});
}

// CP batch plan.

// The first field in which two plans differ, or "" (every stored field, then the JSON of every field).
std::string PlanDiff(const CPSharedKVBatchPlan& a, const CPSharedKVBatchPlan& b) {
#define KVSHARD_FIELD(f) \
  if (!(a.f == b.f)) return #f
  KVSHARD_FIELD(batch_size);
  KVSHARD_FIELD(page_size);
  KVSHARD_FIELD(cp_size);
  KVSHARD_FIELD(cp_rank);
  KVSHARD_FIELD(request_token_offsets);
  KVSHARD_FIELD(request_padded_token_offsets);
  KVSHARD_FIELD(request_page_offsets);
  KVSHARD_FIELD(request_extend_lens);
  KVSHARD_FIELD(request_prefix_lens);
  KVSHARD_FIELD(request_padded_pages);
  KVSHARD_FIELD(request_padded_tokens);
  KVSHARD_FIELD(request_padding_tokens);
  KVSHARD_FIELD(request_split_lists);
  KVSHARD_FIELD(request_zigzag_indices);
  KVSHARD_FIELD(request_segment_page_starts);
  KVSHARD_FIELD(request_segment_page_ends);
  KVSHARD_FIELD(request_rank_local_tokens);
  KVSHARD_FIELD(request_rank_local_offsets);
  KVSHARD_FIELD(request_kv_len_prev);
  KVSHARD_FIELD(request_kv_len_next);
  KVSHARD_FIELD(request_actual_seq_q_prev);
  KVSHARD_FIELD(request_actual_seq_q_next);
  KVSHARD_FIELD(request_last_token_owner);
  KVSHARD_FIELD(request_last_token_local_offset);
  KVSHARD_FIELD(output_collect_mode);
  KVSHARD_FIELD(flat_zigzag_index);
  KVSHARD_FIELD(flat_segment_request_ids);
  KVSHARD_FIELD(flat_segment_offsets);
  KVSHARD_FIELD(compute_padding_enabled);
  KVSHARD_FIELD(request_valid_actual_seq_q_prev);
  KVSHARD_FIELD(request_valid_actual_seq_q_next);
  KVSHARD_FIELD(request_valid_query_row_spans);
  KVSHARD_FIELD(request_compute_split_lists);
  KVSHARD_FIELD(request_compute_segment_page_starts);
  KVSHARD_FIELD(request_compute_segment_page_ends);
  KVSHARD_FIELD(request_compute_padded_pages);
  KVSHARD_FIELD(request_compute_padded_tokens);
  KVSHARD_FIELD(request_compute_padding_tokens);
  KVSHARD_FIELD(request_compute_padded_token_offsets);
  KVSHARD_FIELD(request_compute_rank_local_tokens);
  KVSHARD_FIELD(request_compute_rank_local_offsets);
#undef KVSHARD_FIELD
  return ToJson(a).dump() == ToJson(b).dump() ? "" : "json";
}

// The CP planner's arguments (a CPBatchCase's lists and geometry, possibly corrupted).
struct PlanArgs {
  Int64List extend_lens;
  Int64List prefix_lens;
  int64_t page_size = 2;
  int64_t cp_size = 1;
};

void LogArgs(const PlanArgs& a) {
  RC_LOG() << "cp_size=" << a.cp_size << " page_size=" << a.page_size << " extend_lens=" << rc::toString(a.extend_lens)
           << " prefix_lens=" << rc::toString(a.prefix_lens) << "\n";
}

// Fast and reference plans of rank `rank` agree (fresh and into a reused plan), or fail alike.
void AssertSamePlans(const PlanArgs& a, int64_t rank, CPSharedKVBatchPlan* reused) {
  const StatusOr<CPSharedKVBatchPlan> want =
      ref::BuildBatchPageAlignedInSeqSplitPlan(a.extend_lens, a.prefix_lens, a.page_size, a.cp_size, rank);
  const StatusOr<CPSharedKVBatchPlan> got =
      fast::BuildBatchPageAlignedInSeqSplitPlan(a.extend_lens, a.prefix_lens, a.page_size, a.cp_size, rank);
  AssertSameStatus(got.status(), want.status());
  const Status into =
      fast::BuildBatchPageAlignedInSeqSplitPlanInto(a.extend_lens, a.prefix_lens, a.page_size, a.cp_size, rank, reused);
  AssertSameStatus(into, want.status());
  if (!want.ok()) return;
  RC_ASSERT(PlanDiff(*got, *want) == "");
  RC_ASSERT(PlanDiff(*reused, *want) == "");
}

KVSHARD_PROP(FastVsRefProps, BatchPlanEqualsReferenceOnEveryRank, ()) {
  const CPBatchCase c = *GenCPBatchCase(/*min_ps=*/1);
  const PlanArgs a{c.extend_lens, c.prefix_lens, c.page_size, c.cp_size};
  LogArgs(a);
  RC_CLASSIFY(c.cp_size == 1, "N=1");
  RC_CLASSIFY(c.extend_lens.size() == 1, "one request");
  RC_CLASSIFY(c.page_size == 1, "ps=1 (fallback error)");
  // The reused plan starts as another batch's plan, so stale storage of every size is overwritten.
  const CPBatchCase other = *GenCPBatchCase();
  CPSharedKVBatchPlan reused;
  (void)ref::BuildBatchPageAlignedInSeqSplitPlanInto(other.extend_lens, other.prefix_lens, other.page_size,
                                                     other.cp_size, 0, &reused);
  for (int64_t rank = 0; rank < c.cp_size; ++rank) AssertSamePlans(a, rank, &reused);
}

KVSHARD_PROP(FastVsRefProps, BatchPlanErrorsEqualReference, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  PlanArgs a{c.extend_lens, c.prefix_lens, c.page_size, c.cp_size};
  int64_t rank = *rc::gen::inRange<int64_t>(0, c.cp_size);
  const size_t q = *rc::gen::inRange<size_t>(0, a.extend_lens.size());
  const int64_t big = kMaxCpTokens;
  const int kind = DrawKind(10);
  if (kind == 0) a.prefix_lens.push_back(0);  // lengths differ
  if (kind == 1) a.cp_size = Pick({0, -1, kMaxCpSize + 1});
  if (kind == 2) rank = Pick({-1, a.cp_size});
  if (kind == 3) a.page_size = Pick({0, -3, 1, kMaxCpPageSize + 1});
  if (kind == 4) a.extend_lens[q] = Pick({0, -5, big + 1});
  if (kind == 5) {  // negative, misaligned, or aligned beyond 2^48
    a.prefix_lens[q] = Pick({-a.page_size, a.prefix_lens[q] + 1, (big / a.page_size + 1) * a.page_size});
  }
  if (kind == 6) {  // a batch total beyond 2^48
    a.extend_lens[q] = big / 2 + 1;
    a.extend_lens.push_back(big / 2 + 1);
    a.prefix_lens.push_back(0);
  }
  if (kind == 7) {  // batch_size * 2 * cp_size beyond 2^24
    a.cp_size = kMaxCpSize;
    rank = 0;
    a.extend_lens.assign(129, 1);
    a.prefix_lens.assign(129, 0);
  }
  if (kind == 8) {  // an empty batch: a valid, empty plan
    a.extend_lens.clear();
    a.prefix_lens.clear();
  }
  LogArgs(a);
  RC_TAG(CpErrorLabel(
      ref::BuildBatchPageAlignedInSeqSplitPlan(a.extend_lens, a.prefix_lens, a.page_size, a.cp_size, rank).status()));
  CPSharedKVBatchPlan reused;
  AssertSamePlans(a, rank, &reused);
}

// ---------------------------------------------------------------------------------------------------------------
// Batch rerange.

// The gathered buffer of every rank's rows for `m`, plus `extra` rows, with a byte pattern.
HostTensor Gathered(const NSAContextParallelMetadata& m, int64_t row_bytes, int64_t extra) {
  HostTensor g = HostTensor::Zeros(m.total_seq_lens + extra, row_bytes);
  for (size_t i = 0; i < g.data.size(); ++i) g.data[i] = static_cast<uint8_t>(i * 131 + (i >> 8));
  return g;
}

// The copy lists, source rows and reranged tensors (fresh and into a reused buffer) agree, or fail alike.
void AssertSameRerange(const HostTensor& gathered, const NSAContextParallelMetadata& m, int64_t cp_size) {
  const StatusOr<HostTensor> want = ref::BatchInSeqAllGatherRerange(gathered, m, cp_size);
  const StatusOr<HostTensor> got = fast::BatchInSeqAllGatherRerange(gathered, m, cp_size);
  RC_TAG(CpErrorLabel(want.status()));
  AssertSameStatus(got.status(), want.status());
  const int which = *rc::gen::inRange(0, 3);  // empty, the input's shape, another shape
  HostTensor reused = which == 0 ? HostTensor{} : which == 1 ? gathered : HostTensor::Zeros(3, 8);
  AssertSameStatus(fast::BatchInSeqAllGatherRerangeInto(gathered, m, cp_size, &reused), want.status());
  if (!want.ok()) return;
  RC_ASSERT(*got == *want);
  RC_ASSERT(reused == *want);
}

// BatchRerangeCopies and BatchRerangeSourceRows agree (lists and errors).
void AssertSameCopies(const Int64Table& splits, int64_t cp_size, int64_t max_rank_token) {
  const auto want = ref::BatchRerangeCopies(splits, cp_size, max_rank_token);
  const auto got = fast::BatchRerangeCopies(splits, cp_size, max_rank_token);
  RC_TAG("copies: " + CpErrorLabel(want.status()));
  AssertSameStatus(got.status(), want.status());
  if (want.ok()) {
    RC_ASSERT(got->size() == want->size());
    for (size_t i = 0; i < want->size(); ++i) {
      RC_ASSERT((*got)[i] == (fast::RowCopy{(*want)[i].src_row, (*want)[i].dst_row, (*want)[i].rows}));
    }
  }
  const StatusOr<Int64List> want_rows = ref::BatchRerangeSourceRows(splits, cp_size, max_rank_token);
  const StatusOr<Int64List> got_rows = fast::BatchRerangeSourceRows(splits, cp_size, max_rank_token);
  AssertSameStatus(got_rows.status(), want_rows.status());
  if (want_rows.ok()) RC_ASSERT(*got_rows == *want_rows);
}

KVSHARD_PROP(FastVsRefProps, RerangeEqualsReference, ()) {
  const CPBatchCase c = DrawRerangeCase();
  showValue(c, RC_LOG());
  RC_LOG() << "\n";
  RC_CLASSIFY(c.cp_size == 1, "N=1");
  RC_CLASSIFY(c.extend_lens.size() == 1, "one request (not_batch error)");
  const NSAContextParallelMetadata m = RC_VALUE(ref::BuildBatchMetadataFromPlan(RankPlan(c, 0)));
  RC_CLASSIFY(m.batch_plan->compute_padding_enabled, "compute padding");
  const HostTensor gathered = Gathered(m, c.row_bytes, *rc::gen::element<int64_t>(0, 0, 1, 5));
  AssertSameCopies(m.batch_plan->request_split_lists, c.cp_size, m.max_rank_token());
  AssertSameRerange(gathered, m, c.cp_size);
}

KVSHARD_PROP(FastVsRefProps, RerangeErrorsEqualReference, ()) {
  const CPBatchCase c =
      *rc::gen::suchThat(GenCPBatchCase(), [](const CPBatchCase& x) { return x.extend_lens.size() > 1; });
  showValue(c, RC_LOG());
  NSAContextParallelMetadata m = RC_VALUE(ref::BuildBatchMetadataFromPlan(RankPlan(c, 0)));
  HostTensor gathered = Gathered(m, c.row_bytes, 0);
  CPSharedKVBatchPlan plan = *m.batch_plan;
  int64_t cp_size = c.cp_size;
  const int kind = DrawKind(12);
  RC_LOG() << " fault=" << kind << "\n";
  switch (kind) {
    case 0: m.batch_size = Pick({0, 1, -1}); break;
    case 1: m.batch_plan = nullptr; break;
    case 2: m.max_rank_len.resize(*rc::gen::inRange<size_t>(0, m.max_rank_len.size() + 1)); break;
    case 3: m.max_rank_len[0] = Pick({-1, m.max_rank_len[0] - 1, kMaxCpTokens + 1}); break;
    case 4: cp_size = Pick({0, -1, cp_size + 1, kMaxCpSize + 1}); break;
    case 5:  // one row short
      gathered.rows -= 1;
      gathered.data.resize(gathered.data.size() - gathered.row_bytes);
      break;
    case 6: gathered.row_bytes = 0; break;
    case 7: gathered.data.push_back(0); break;
    case 8: plan.request_split_lists.values[0] = Pick({-1, kMaxCpTokens + 1}); break;
    case 9: plan.request_split_lists.width += 2; break;
    case 10:
      m.batch_plan = nullptr;
      m.batch_size = 5;
      break;
    default: break;
  }
  if (kind >= 8 && kind <= 9) m.batch_plan = std::make_shared<const CPSharedKVBatchPlan>(plan);
  AssertSameRerange(gathered, m, cp_size);
}

KVSHARD_PROP(FastVsRefProps, RerangeCopiesEqualReferenceOnArbitraryTables, ()) {
  Int64Table splits;
  const int64_t cp_size = Pick({1, 2, 3, 1, 2, 3, -1, 0, kMaxCpSize + 1});
  splits.width = DrawKind(4) == 0 ? *rc::gen::inRange<int64_t>(0, 7) : 2 * std::max<int64_t>(cp_size, 1) % 7;
  splits.values = *rc::gen::container<Int64List>(
      static_cast<size_t>(splits.width * *rc::gen::inRange<int64_t>(0, 5)),
      rc::gen::weightedOneOf<int64_t>(
          {{8, rc::gen::inRange<int64_t>(0, 6)}, {1, rc::gen::element<int64_t>(-1, kMaxCpTokens + 1)}}));
  const int64_t max_rank_token = *rc::gen::resize(100, rc::gen::inRange<int64_t>(-1, 25));
  RC_LOG() << "width=" << splits.width << " values=" << rc::toString(splits.values) << " cp_size=" << cp_size
           << " max_rank_token=" << max_rank_token << "\n";
  AssertSameCopies(splits, cp_size, max_rank_token);
}

}  // namespace
}  // namespace kvshard::props
