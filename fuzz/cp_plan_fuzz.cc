// Fuzz target: the CP planners fed arbitrary (cp_size, page_size, cp_rank, extend and prefix lengths), decoded
// from the bytes with a bias to the limits of core/cp_limits.h. Oracle: every input is refused with a Status or
// planned; the fast in-seq plan and rerange equal the reference's (errors word for word); and where the batch
// is small, the plan covers each token once: every rank's valid rows split off a row-numbered input, gathered
// rank-major in max_rank_token blocks and reranged give back the input in order. Round-robin q lengths and the
// token-balanced split also sum to the lengths they split.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/cp_limits.h"
#include "core/cp_plan.h"
#include "core/cp_plan_json.h"
#include "core/host_tensor.h"
#include "cpu_fast/cp_data.h"
#include "cpu_fast/cp_split.h"
#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_split.h"
#include "fuzz/fuzz_util.h"

namespace kvshard::fuzz {
namespace {

// Segment and row counts up to which the full (all ranks, row-level) checks run.
constexpr int64_t kFullSegments = 1 << 12;
constexpr int64_t kFullRows = 1 << 14;

bool SameStatus(const Status& a, const Status& b) { return a.code() == b.code() && a.message() == b.message(); }

struct Input {
  int64_t cp_size = 1, page_size = 1, cp_rank = 0;
  Int64List extend_lens, prefix_lens;
};

Input Decode(ByteReader& in) {
  Input x;
  x.cp_size = in.Byte() % 4 ? in.Range(1, 8) : in.Edgy(kMaxCpSize);
  x.page_size = in.Byte() % 4 ? in.Range(1, 64) : in.Edgy(kMaxCpPageSize);
  x.cp_rank =
      in.Byte() % 8 && x.cp_size >= 1 && x.cp_size <= (1 << 16) ? in.Range(0, x.cp_size - 1) : in.Edgy(x.cp_size);
  const int64_t batch = in.Byte() % 8 ? in.Range(0, 8) : in.Range(0, 512);
  const uint8_t prefix_mode = in.Byte() % 4;  // 0: zeros, 1: page multiples, 2: arbitrary, 3: one too few
  for (int64_t q = 0; q < batch; ++q) {
    x.extend_lens.push_back(in.Byte() % 4 ? in.Range(0, 300) : in.Edgy(kMaxCpTokens));
    if (prefix_mode == 0) {
      x.prefix_lens.push_back(0);
    } else if (prefix_mode == 1 || (prefix_mode == 3 && q + 1 < batch)) {
      x.prefix_lens.push_back(in.Range(0, 16) * std::clamp<int64_t>(x.page_size, 1, kMaxCpPageSize));
    } else if (prefix_mode == 2) {
      x.prefix_lens.push_back(in.Edgy(kMaxCpTokens));
    }
  }
  return x;
}

int64_t Segments(const Input& x) {
  const int64_t cp = std::clamp<int64_t>(x.cp_size, 0, kMaxCpSize + 1);
  return static_cast<int64_t>(x.extend_lens.size()) * 2 * cp;
}

// The reference and fast rerange agree; returns the reference's copies (empty on error).
std::vector<ref::RowCopy> CheckRerange(const CPSharedKVBatchPlan& plan, int64_t max_rank_token) {
  const auto want = ref::BatchRerangeCopies(plan.request_split_lists, plan.cp_size, max_rank_token);
  const auto got = fast::BatchRerangeCopies(plan.request_split_lists, plan.cp_size, max_rank_token);
  FUZZ_ASSERT(SameStatus(want.status(), got.status()), "rerange copies: fast '", got.status().ToString(), "' != ref '",
              want.status().ToString(), "'");
  if (!want.ok()) return {};
  FUZZ_ASSERT(want->size() == got->size(), "rerange copy counts differ");
  for (size_t i = 0; i < want->size(); ++i) {
    const ref::RowCopy& a = (*want)[i];
    const fast::RowCopy& b = (*got)[i];
    FUZZ_ASSERT(a.src_row == b.src_row && a.dst_row == b.dst_row && a.rows == b.rows, "rerange copy ", i, " differs");
  }
  return *want;
}

// Splits a row-numbered input by every rank's plan, gathers the valid rows rank-major in blocks of
// max_rank_token rows and reranges: the result must be the input, row for row.
void CheckCoversEachTokenOnce(const Input& x, const CPSharedKVBatchPlan& plan0, int64_t max_rank_token,
                              const std::vector<ref::RowCopy>& copies) {
  const int64_t rows = std::accumulate(x.extend_lens.begin(), x.extend_lens.end(), int64_t{0});
  HostTensor input = HostTensor::Zeros(rows, 8);
  for (int64_t i = 0; i < rows; ++i) std::memcpy(input.row(i), &i, 8);
  std::vector<int64_t> gathered(static_cast<size_t>(x.cp_size * max_rank_token), -1);
  for (int64_t r = 0; r < x.cp_size; ++r) {
    const StatusOr<CPSharedKVBatchPlan> plan =
        ref::BuildBatchPageAlignedInSeqSplitPlan(x.extend_lens, x.prefix_lens, x.page_size, x.cp_size, r);
    FUZZ_ASSERT(plan.ok(), "rank ", r, " refused a batch rank ", x.cp_rank, " planned: ", plan.status().ToString());
    FUZZ_ASSERT(ToJson(*plan)["request_split_lists"] == ToJson(plan0)["request_split_lists"],
                "split lists differ between ranks");
    const StatusOr<HostTensor> local =
        ref::SplitTensorByCPBatchPlan(input, *plan, ref::SplitMode::kData, SplitKind::kValid);
    FUZZ_ASSERT(local.ok(), "rank ", r, ": valid split of the batch's own input failed: ", local.status().ToString());
    FUZZ_ASSERT(local->rows <= max_rank_token, "rank ", r, " holds ", local->rows, " rows > max_rank_token ",
                max_rank_token);
    for (int64_t j = 0; j < local->rows; ++j)
      std::memcpy(&gathered[r * max_rank_token + j], local->data.data() + j * 8, 8);
  }
  std::vector<int64_t> out;
  for (const ref::RowCopy& c : copies) {
    FUZZ_ASSERT(c.dst_row == static_cast<int64_t>(out.size()), "copies in output order");
    for (int64_t k = 0; k < c.rows; ++k) out.push_back(gathered[c.src_row + k]);
  }
  FUZZ_ASSERT(static_cast<int64_t>(out.size()) == rows, "rerange gives ", out.size(), " rows of ", rows);
  for (int64_t i = 0; i < rows; ++i) FUZZ_ASSERT(out[i] == i, "output row ", i, " holds input row ", out[i]);
  const auto source = ref::BatchRerangeSourceRows(plan0.request_split_lists, x.cp_size, max_rank_token);
  const auto fast_source = fast::BatchRerangeSourceRows(plan0.request_split_lists, x.cp_size, max_rank_token);
  FUZZ_ASSERT(source.ok() && fast_source.ok() && *source == *fast_source, "source rows ref vs fast");
}

void CheckInSeq(const Input& x) {
  const int64_t segments = Segments(x);
  if (segments > kFullSegments && segments <= kMaxCpSegments) return;  // accepted but too slow to fuzz
  const StatusOr<CPSharedKVBatchPlan> want =
      ref::BuildBatchPageAlignedInSeqSplitPlan(x.extend_lens, x.prefix_lens, x.page_size, x.cp_size, x.cp_rank);
  const StatusOr<CPSharedKVBatchPlan> got =
      fast::BuildBatchPageAlignedInSeqSplitPlan(x.extend_lens, x.prefix_lens, x.page_size, x.cp_size, x.cp_rank);
  FUZZ_ASSERT(SameStatus(want.status(), got.status()), "in-seq plan: fast '", got.status().ToString(), "' != ref '",
              want.status().ToString(), "'");
  if (!want.ok()) {
    FUZZ_ASSERT(want.status().code() == StatusCode::kInvalidArgument, "a refusal is InvalidArgument");
    return;
  }
  FUZZ_ASSERT(segments <= kFullSegments, "a batch of ", segments, " segments past the limit was planned");
  const Json want_json = ToJson(*want);
  FUZZ_ASSERT(want_json == ToJson(*got), "fast in-seq plan differs from the reference");
  // The fast planner reusing a plan that held another batch gives the same plan.
  CPSharedKVBatchPlan reused = *want;
  reused.request_extend_lens.push_back(7);
  FUZZ_ASSERT(fast::BuildBatchPageAlignedInSeqSplitPlanInto(x.extend_lens, x.prefix_lens, x.page_size, x.cp_size,
                                                            x.cp_rank, &reused)
                      .ok() &&
                  ToJson(reused) == want_json,
              "fast plan into reused storage differs");
  for (int64_t q = 0; q < want->batch_size; ++q) {
    const auto split = (*want).request_split_lists[q];
    FUZZ_ASSERT(std::accumulate(split.begin(), split.end(), int64_t{0}) == x.extend_lens[q], "request ", q,
                "'s valid split does not sum to its extend length");
  }
  const StatusOr<NSAContextParallelMetadata> meta = ref::BuildBatchMetadataFromPlan(*want);
  if (!meta.ok()) {
    FUZZ_ASSERT(want->batch_size == 0, "metadata of a planned batch refused: ", meta.status().ToString());
    return;
  }
  const int64_t max_rank_token = meta->max_rank_token();
  const std::vector<ref::RowCopy> copies = CheckRerange(*want, max_rank_token);
  const int64_t rows = std::accumulate(x.extend_lens.begin(), x.extend_lens.end(), int64_t{0});
  if (x.cp_size <= 8 && rows <= kFullRows && max_rank_token <= kFullRows) {
    CheckCoversEachTokenOnce(x, *want, max_rank_token, copies);
  }
}

void CheckRoundRobinAndBalanced(const Input& x) {
  if (x.cp_size >= 1 && x.cp_size <= 8) {
    Int64List total(x.extend_lens.size(), 0);
    bool ok = true;
    for (int64_t r = 0; r < x.cp_size && ok; ++r) {
      const StatusOr<ref::RoundRobinQSeqs> q = ref::RoundRobinSplitQSeqs(x.extend_lens, x.cp_size, r);
      ok = q.ok();
      if (!ok) break;
      FUZZ_ASSERT(q->q_lens.size() == q->bs_idx.size(), "round-robin lists");
      for (size_t i = 0; i < q->q_lens.size(); ++i) total[q->bs_idx[i]] += q->q_lens[i];
    }
    if (ok) {
      // Lengths carry their remainder forward, so only the batch total is split exactly.
      const int64_t want = std::accumulate(x.extend_lens.begin(), x.extend_lens.end(), int64_t{0});
      FUZZ_ASSERT(std::accumulate(total.begin(), total.end(), int64_t{0}) <= want, "round-robin rows exceed the batch");
    }
    (void)ref::RoundRobinLastTokenLocations(x.extend_lens, x.cp_size);
  }
  const int64_t total_len = x.extend_lens.empty() ? 0 : x.extend_lens[0];
  const StatusOr<Int64List> balanced = ref::BuildTokenBalancedInSeqSplitList(total_len, x.cp_size);
  if (balanced.ok()) {
    FUZZ_ASSERT(static_cast<int64_t>(balanced->size()) == 2 * x.cp_size, "2N segments");
    FUZZ_ASSERT(std::accumulate(balanced->begin(), balanced->end(), int64_t{0}) == total_len, "balanced sum");
    const auto [lo, hi] = std::minmax_element(balanced->begin(), balanced->end());
    FUZZ_ASSERT(*hi - *lo <= 1, "token-balanced segments differ by more than one");
  }
  if (!x.extend_lens.empty() && !x.prefix_lens.empty()) {
    (void)ref::BuildPageAlignedInSeqSplitList(total_len, x.extend_lens[0], x.prefix_lens[0], x.page_size, x.cp_size);
  }
}

}  // namespace
}  // namespace kvshard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvshard::fuzz::ByteReader in(data, size);
  const kvshard::fuzz::Input x = kvshard::fuzz::Decode(in);
  kvshard::fuzz::CheckInSeq(x);
  kvshard::fuzz::CheckRoundRobinAndBalanced(x);
  return 0;
}
