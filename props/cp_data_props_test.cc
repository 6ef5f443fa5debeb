// Properties of CP data movement (spec §4-6; seed 003) on payloads whose rows encode (request, token):
// rank rows are segments r and 2N-1-r, rerange(all_gather(split(x))) == x (batch and bs=1, with and without
// compute padding), valid-row selection, positions (global after the gather), last-token collection, round-robin.
#include <algorithm>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "cpu_ref/cp_collect.h"
#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_split.h"
#include "props/cp_generators.h"
#include "props/property.h"

namespace kvshard::props {
namespace {

HostTensor Split(const HostTensor& x, const CPSharedKVBatchPlan& p, SplitKind kind,
                 ref::SplitMode mode = ref::SplitMode::kData) {
  return RC_VALUE(ref::SplitTensorByCPBatchPlan(x, p, mode, kind));
}

// Ids rank r must hold: per request, the tokens of segment r then of segment 2N-1-r of `lists`, padding
// positions (>= extend) as 0.
Int64List ExpectedRankIds(const CPSharedKVBatchPlan& p, const Int64Table& lists) {
  Int64List ids;
  for (int64_t q = 0; q < p.batch_size; ++q) {
    const Int64List seg = SegmentOfPosition(lists[q]);
    for (int64_t s : {p.cp_rank, 2 * p.cp_size - 1 - p.cp_rank}) {
      for (int64_t t = 0; t < static_cast<int64_t>(seg.size()); ++t) {
        if (seg[t] == s) ids.push_back(t < p.request_extend_lens[q] ? RowId(q, t) : 0);
      }
    }
  }
  return ids;
}

Int64List Ids(const HostTensor& t) {
  Int64List ids;
  for (int64_t i = 0; i < t.rows; ++i) ids.push_back(ReadId(t, i));
  return ids;
}

KVSHARD_PROP(CPDataProps, RankRowsAreSegmentsRAndMirror, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const HostTensor x = Payload(c.extend_lens, c.row_bytes);
  for (const CPSharedKVBatchPlan& p : AllRankPlans(c)) {
    const HostTensor valid = Split(x, p, SplitKind::kValid);
    RC_ASSERT(Ids(valid) == ExpectedRankIds(p, p.request_split_lists));
    const HostTensor compute = Split(x, p, SplitKind::kCompute);
    RC_ASSERT(Ids(compute) ==
              ExpectedRankIds(p, p.compute_padding_enabled ? p.request_compute_split_lists : p.request_split_lists));
    for (int64_t i = 0; i < valid.rows; ++i) {  // whole rows move, not just their ids
      const int64_t id = ReadId(valid, i);
      const int64_t q = (id >> 32) - 1, t = (id & 0xffffffff) - 1;
      RC_ASSERT(std::equal(valid.row(i), valid.row(i) + c.row_bytes, x.row(p.request_token_offsets[q] + t)));
    }
  }
}

// Compute splits plus valid-row selection (the cache-write path), the padded all-gather and the rerange
// restore the batch: the batch rerange for bs > 1, the bs=1 path (reverse_split_len + cp_reverse_index on
// the communication split) for one request.
KVSHARD_PROP(CPDataProps, RerangeOfAllGatherOfSplitIsIdentity, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const HostTensor x = Payload(c.extend_lens, c.row_bytes);
  const std::vector<CPSharedKVBatchPlan> plans = AllRankPlans(c);
  const NSAContextParallelMetadata m = RC_VALUE(ref::BuildBatchMetadataFromPlan(plans[0]));
  RC_CLASSIFY(plans[0].compute_padding_enabled, "compute padding");
  RC_CLASSIFY(c.extend_lens.size() == 1, "one request");
  RC_CLASSIFY(c.cp_size == 1, "N=1");
  RC_CLASSIFY(c.page_size == 2, "ps=2");
  RC_CLASSIFY(std::any_of(c.extend_lens.begin(), c.extend_lens.end(),
                          [&](int64_t e) { return e < 2 * c.cp_size * c.page_size; }),
              "extend < 2N pages");
  RC_CLASSIFY(std::any_of(c.extend_lens.begin(), c.extend_lens.end(), [&](int64_t e) { return e % c.page_size != 0; }),
              "partial last page");
  std::vector<HostTensor> local;
  for (const CPSharedKVBatchPlan& p : plans) {
    const HostTensor compute = Split(x, p, SplitKind::kCompute);
    if (c.extend_lens.size() > 1) {
      local.push_back(RC_VALUE(ref::SelectCPLocalValidRowsForCacheWrite(compute, p)));
    } else {
      local.push_back(compute);  // bs=1 gathers the communication (compute) rows
    }
  }
  const HostTensor gathered = RC_VALUE(ref::AllGatherPadded(local, m.total_seq_lens));
  RC_ASSERT(gathered.rows == m.max_rank_token() * c.cp_size);
  if (c.extend_lens.size() > 1) {
    RC_ASSERT(RC_VALUE(ref::BatchInSeqAllGatherRerange(gathered, m, c.cp_size)) == x);
  } else {
    HostTensor out = RC_VALUE(ref::InSeqAllGatherRerange(gathered, m));
    const int64_t padded =
        plans[0].compute_padding_enabled ? plans[0].request_compute_padded_tokens[0] : c.extend_lens[0];
    RC_ASSERT(out.rows == padded);
    for (int64_t i = c.extend_lens[0]; i < out.rows; ++i) RC_ASSERT(ReadId(out, i) == 0);
    out.rows = c.extend_lens[0];
    out.data.resize(out.rows * out.row_bytes);
    RC_ASSERT(out == x);
  }
}

// The CLI's source_rows describe the same rerange the data path performs.
KVSHARD_PROP(CPDataProps, SourceRowsDescribeTheBatchRerange, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const NSAContextParallelMetadata m = RC_VALUE(ref::BuildBatchMetadataFromPlan(AllRankPlans(c)[0]));
  const Int64List rows =
      RC_VALUE(ref::BatchRerangeSourceRows(m.batch_plan->request_split_lists, c.cp_size, m.max_rank_token()));
  HostTensor gathered = HostTensor::Zeros(m.total_seq_lens, 8);
  for (int64_t i = 0; i < gathered.rows; ++i) WriteRow(gathered.row(i), 8, i + 1);
  if (c.extend_lens.size() > 1) {
    Int64List got = Ids(RC_VALUE(ref::BatchInSeqAllGatherRerange(gathered, m, c.cp_size)));
    for (int64_t& id : got) --id;
    RC_ASSERT(got == rows);
  }
  // Each rank's block is filled from its start with its valid rows, padding after them.
  const RerangeTables t = BuildRerangeTables(m.batch_plan->request_split_lists, c.cp_size);
  Int64List sorted = rows;
  std::sort(sorted.begin(), sorted.end());
  Int64List want;
  for (int64_t r = 0; r < c.cp_size; ++r) {
    for (int64_t i = 0; i < t.per_rank_tokens[r]; ++i) want.push_back(r * m.max_rank_token() + i);
  }
  RC_ASSERT(sorted == want);
}

KVSHARD_PROP(CPDataProps, ValidRowSelectionDropsExactlyComputePadding, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const HostTensor x = Payload(c.extend_lens, c.row_bytes);
  for (const CPSharedKVBatchPlan& p : AllRankPlans(c)) {
    const HostTensor compute = Split(x, p, SplitKind::kCompute);
    const HostTensor selected = RC_VALUE(ref::SelectCPLocalValidRowsForCacheWrite(compute, p));
    RC_ASSERT(selected == Split(x, p, SplitKind::kValid));
    int64_t zero_rows = 0;
    for (int64_t i = 0; i < compute.rows; ++i) zero_rows += ReadId(compute, i) == 0;
    RC_ASSERT(compute.rows - selected.rows == zero_rows);
    // The valid query row spans locate the valid rows inside each request's compute rows.
    const FlatSplitTables t = FlattenSplitTables(p, SplitKind::kCompute);
    for (int64_t q = 0; q < p.batch_size && p.compute_padding_enabled; ++q) {
      for (const RowSpan& span : p.request_valid_query_row_spans[q]) {
        for (int64_t i = 0; i < span.length; ++i)
          RC_ASSERT(ReadId(compute, t.local_row_offsets[q] + span.start + i) != 0);
      }
    }
  }
}

// Position mode: padding rows continue the request's positions (+1 per row).
KVSHARD_PROP(CPDataProps, PositionPaddingContinuesPositions, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  HostTensor pos = HostTensor::Zeros(0, 8);
  Int64List bases;
  for (int64_t e : c.extend_lens) {
    bases.push_back(*rc::gen::inRange<int64_t>(0, 100000));
    for (int64_t t = 0; t < e; ++t) {
      const int64_t v = bases.back() + t;
      pos.data.insert(pos.data.end(), reinterpret_cast<const uint8_t*>(&v), reinterpret_cast<const uint8_t*>(&v) + 8);
      ++pos.rows;
    }
  }
  for (const CPSharedKVBatchPlan& p : AllRankPlans(c)) {
    const HostTensor got = Split(pos, p, SplitKind::kCompute, ref::SplitMode::kPosition);
    Int64List want;
    const Int64Table& lists = p.compute_padding_enabled ? p.request_compute_split_lists : p.request_split_lists;
    for (int64_t q = 0; q < p.batch_size; ++q) {
      const Int64List seg = SegmentOfPosition(lists[q]);
      for (int64_t s : {p.cp_rank, 2 * p.cp_size - 1 - p.cp_rank}) {
        for (int64_t t = 0; t < static_cast<int64_t>(seg.size()); ++t) {
          if (seg[t] == s) want.push_back(bases[q] + t);
        }
      }
    }
    RC_ASSERT(Ids(got) == want);
  }
}

// The narrow last-token collection over every rank's compute rows returns each request's last valid token.
KVSHARD_PROP(CPDataProps, LastTokenCollectionReturnsLastValidTokens, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const HostTensor x = Payload(c.extend_lens, c.row_bytes);
  const std::vector<CPSharedKVBatchPlan> plans = AllRankPlans(c);
  std::vector<HostTensor> hidden;
  for (const CPSharedKVBatchPlan& p : plans) hidden.push_back(Split(x, p, SplitKind::kCompute));
  const HostTensor last = RC_VALUE(ref::InSeqCollectLastTokenBatch(hidden, plans));
  RC_ASSERT(last.rows == static_cast<int64_t>(c.extend_lens.size()));
  for (int64_t q = 0; q < last.rows; ++q) {
    RC_ASSERT(std::equal(last.row(q), last.row(q) + c.row_bytes,
                         x.row(plans[0].request_token_offsets[q] + c.extend_lens[q] - 1)));
  }
}

// bs=1 scalar path for any page size (ps = 1 included): token-balanced or page-aligned split (with padding
// when total_len > extend_len), cp_split_and_rebuild per rank, padded all-gather, reverse rerange.
KVSHARD_PROP(CPDataProps, ScalarRerangeIsIdentityForAnyPageSize, ()) {
  const int64_t n = *GenCpSize();
  const int64_t ps = *GenPageSize(1);
  const int64_t extend = *rc::gen::inRange<int64_t>(0, 3000);
  const int64_t total = extend + *rc::gen::weightedOneOf<int64_t>(
                                     {{3, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(0, 64)}});
  const int64_t prefix = ps * *rc::gen::inRange<int64_t>(0, 3) + *rc::gen::element<int64_t>(0, 0, 0, 1);
  const ref::InSeqSplit split = RC_VALUE(ref::BuildPageAlignedInSeqSplitList(total, extend, prefix, ps, n));
  HostTensor x = Payload({total}, 16);
  std::vector<HostTensor> local;
  NSAContextParallelMetadata m;
  for (int64_t r = 0; r < n; ++r) {
    m = RC_VALUE(ref::BuildScalarCPMetadata(split, n, r));
    Int64List starts = {0};
    for (int64_t s : m.split_list) starts.push_back(starts.back() + s);
    Int64List rows;
    for (int64_t s : m.zigzag_index) {
      for (int64_t i = starts[s]; i < starts[s + 1]; ++i) rows.push_back(i);
    }
    local.push_back(RC_VALUE(ref::IndexRows(x, rows)));
  }
  const HostTensor gathered = RC_VALUE(ref::AllGatherPadded(local, m.total_seq_lens));
  RC_ASSERT(RC_VALUE(ref::InSeqAllGatherRerange(gathered, m)) == x);
  if (extend > 0) {  // the real last token (not a padding row) is found in the padded split
    const HostTensor last = RC_VALUE(ref::InSeqCollectLastTokenScalar(local, m.split_list, extend));
    RC_ASSERT(ReadId(last, 0) == RowId(0, extend - 1));
  }
}

KVSHARD_PROP(CPDataProps, RoundRobinSplitRestoreIsIdentity, ()) {
  const int64_t n = *GenCpSize();
  const Int64List lens =
      *rc::gen::container<Int64List>(*rc::gen::inRange<size_t>(1, 9), rc::gen::inRange<int64_t>(1, 300));
  int64_t total = 0;
  for (int64_t l : lens) total += l;
  const int64_t padded = (total + n - 1) / n * n;  // cal_padded_tokens: ceil_align to cp_size
  const HostTensor x = Payload(lens, 12);
  HostTensor xp = x;
  xp.data.resize(padded * 12, 0);
  xp.rows = padded;
  std::vector<HostTensor> local;
  for (int64_t r = 0; r < n; ++r) {
    local.push_back(RC_VALUE(ref::RoundRobinSplitData(xp, n, r)));
    RC_ASSERT(local.back().rows == padded / n);
    const ref::RoundRobinQSeqs q = RC_VALUE(ref::RoundRobinSplitQSeqs(lens, n, r));
    int64_t sum = 0;
    for (int64_t v : q.q_lens) sum += v;
    RC_ASSERT(sum == total / n + (total % n > r ? 1 : 0));  // the valid rows of rank r
  }
  RC_ASSERT(RC_VALUE(ref::RoundRobinRestore(RC_VALUE(ref::ConcatRows(local)), n)) == xp);
  const HostTensor last = RC_VALUE(ref::RoundRobinCollectLastToken(local, lens));
  for (size_t q = 0; q < lens.size(); ++q) RC_ASSERT(ReadId(last, q) == RowId(q, lens[q] - 1));
}

KVSHARD_PROP(CPDataProps, PaddedAllGatherThenTrimIsConcatenation, ()) {
  const int64_t n = *GenCpSize();
  const int64_t max_rows = *rc::gen::inRange<int64_t>(0, 50);
  std::vector<HostTensor> local;
  Int64List counts, ids;
  for (int64_t r = 0; r < n; ++r) {
    counts.push_back(*rc::gen::inRange<int64_t>(0, max_rows + 1));
    Int64List rank_ids;
    for (int64_t i = 0; i < counts.back(); ++i) rank_ids.push_back(RowId(r, i));
    ids.insert(ids.end(), rank_ids.begin(), rank_ids.end());
    HostTensor t = HostTensor::Zeros(counts.back(), 9);
    for (int64_t i = 0; i < t.rows; ++i) WriteRow(t.row(i), 9, rank_ids[i]);
    local.push_back(t);
  }
  const HostTensor g = RC_VALUE(ref::AllGatherPadded(local, max_rows * n));
  RC_ASSERT(g.rows == max_rows * n);
  const HostTensor trimmed = RC_VALUE(ref::TrimCPRankPaddingAfterAllGather(g, Int64List(n, max_rows), counts));
  RC_ASSERT(Ids(trimmed) == ids);
}

// Input row counts other than the batch total are rejected with SGLang's tag, except trailing rows within the
// compute/static padding allowance of a compute split, which are dropped.
KVSHARD_PROP(CPDataProps, SplitInputLengthRules, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const CPSharedKVBatchPlan p = AllRankPlans(c)[0];
  const HostTensor x = Payload(c.extend_lens, c.row_bytes);
  const int64_t delta = *rc::gen::suchThat(rc::gen::inRange<int64_t>(-63, 64), [](int64_t d) { return d != 0; });
  RC_PRE(x.rows + delta >= 0);
  HostTensor y = HostTensor::Zeros(x.rows + delta, c.row_bytes);
  std::copy(x.data.begin(), x.data.begin() + std::min(x.data.size(), y.data.size()), y.data.begin());
  const std::optional<int64_t> static_padded = *rc::gen::element<std::optional<int64_t>>(std::nullopt, x.rows + 8);
  const StatusOr<HostTensor> got =
      ref::SplitTensorByCPBatchPlan(y, p, ref::SplitMode::kData, SplitKind::kCompute, static_padded);
  int64_t compute_total = 0;
  for (int64_t v : p.request_compute_padded_tokens) compute_total += v;
  const int64_t allowed = std::max(p.compute_padding_enabled ? compute_total : x.rows, static_padded.value_or(x.rows));
  const bool allowance = p.compute_padding_enabled || (static_padded.has_value() && *static_padded > x.rows);
  if (delta > 0 && y.rows <= allowed && allowance) {
    RC_ASSERT(RC_VALUE(got) == Split(x, p, SplitKind::kCompute));
  } else {
    RC_ASSERT(!got.ok());
    RC_ASSERT(got.status().message().rfind("[CP_SHARED_KV_FAIL_FAST][batch_gt1_split_input_len_mismatch] ", 0) == 0);
  }
  const StatusOr<HostTensor> valid =
      ref::SplitTensorByCPBatchPlan(y, p, ref::SplitMode::kData, SplitKind::kValid, static_padded);
  RC_ASSERT(!valid.ok());
}

// The batch's global positions as a 1-D int64 tensor: token t of request q is at prefix_lens[q] + t.
HostTensor GlobalPositions(const CPBatchCase& c) {
  HostTensor pos = HostTensor::Zeros(0, 8);
  for (size_t q = 0; q < c.extend_lens.size(); ++q) {
    for (int64_t t = 0; t < c.extend_lens[q]; ++t) {
      const int64_t v = c.prefix_lens[q] + t;
      pos.data.insert(pos.data.end(), reinterpret_cast<const uint8_t*>(&v), reinterpret_cast<const uint8_t*>(&v) + 8);
      ++pos.rows;
    }
  }
  return pos;
}

// SGLang once applied RoPE after the CP all-gather with local positions. Each rank's split position rows are the
// GLOBAL positions of its segments r and 2N-1-r (padding continuing +1), and after the all-gather (rank blocks
// padded to max_rank_token, concatenated) and the rerange every rank holds exactly each request's global
// positions in request order, padding rows excluded.
KVSHARD_PROP(CPDataProps, GatheredPositionsAreGlobalOnEveryRank, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const HostTensor pos = GlobalPositions(c);
  const std::vector<CPSharedKVBatchPlan> plans = AllRankPlans(c);
  const bool batched = c.extend_lens.size() > 1;
  RC_CLASSIFY(plans[0].compute_padding_enabled, "compute padding");
  RC_CLASSIFY(!batched, "one request");
  RC_CLASSIFY(c.cp_size == 1, "N=1");
  RC_CLASSIFY(std::any_of(c.extend_lens.begin(), c.extend_lens.end(), [&](int64_t e) { return e % c.page_size != 0; }),
              "partial last page");
  std::vector<HostTensor> local;
  std::vector<NSAContextParallelMetadata> metas;
  for (const CPSharedKVBatchPlan& p : plans) {
    const HostTensor rows = Split(pos, p, SplitKind::kCompute, ref::SplitMode::kPosition);
    const Int64Table& lists = p.compute_padding_enabled ? p.request_compute_split_lists : p.request_split_lists;
    Int64List want;
    for (int64_t q = 0; q < p.batch_size; ++q) {
      Int64List starts = {0};
      for (int64_t len : lists[q]) starts.push_back(starts.back() + len);
      for (int64_t s : {p.cp_rank, 2 * p.cp_size - 1 - p.cp_rank}) {
        for (int64_t t = starts[s]; t < starts[s + 1]; ++t) want.push_back(c.prefix_lens[q] + t);
      }
    }
    RC_ASSERT(Ids(rows) == want);
    // bs > 1 gathers the valid rows (the batch layout is the valid split); bs = 1 the communication rows.
    local.push_back(batched ? RC_VALUE(ref::SelectCPLocalValidRowsForCacheWrite(rows, p)) : rows);
    metas.push_back(RC_VALUE(ref::BuildBatchMetadataFromPlan(p)));
  }
  const int64_t max_rank_token = metas[0].max_rank_token();
  HostTensor gathered = HostTensor::Zeros(0, 8);
  for (const HostTensor& block : local) {
    RC_ASSERT(block.rows <= max_rank_token);
    gathered.data.insert(gathered.data.end(), block.data.begin(), block.data.end());
    gathered.data.resize(gathered.data.size() + (max_rank_token - block.rows) * 8, 0);
    gathered.rows += max_rank_token;
  }
  for (const NSAContextParallelMetadata& m : metas) {  // every rank reranges the same buffer with its metadata
    HostTensor out = batched ? RC_VALUE(ref::BatchInSeqAllGatherRerange(gathered, m, c.cp_size))
                             : RC_VALUE(ref::InSeqAllGatherRerange(gathered, m));
    RC_ASSERT(out.rows >= pos.rows);
    for (int64_t i = pos.rows; i < out.rows; ++i) RC_ASSERT(ReadId(out, i) == c.prefix_lens[0] + i);  // bs=1 padding
    out.rows = pos.rows;
    out.data.resize(out.rows * 8);
    RC_ASSERT(Ids(out) == Ids(pos));
  }
}

}  // namespace
}  // namespace kvshard::props
