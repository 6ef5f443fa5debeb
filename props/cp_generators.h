// RapidCheck generators and helpers for the CP split/rerange properties: ragged batches and single-request
// splits that reach the edges (N = 1, ps = 1 or 2, one request, extends shorter than 2N pages, partial last
// pages, empty and misaligned prefixes), per-rank plans that fail the property (never abort) on an error, and
// payload rows that encode (request, token) so a misplaced row is visible.
#ifndef KVSHARD_PROPS_CP_GENERATORS_H_
#define KVSHARD_PROPS_CP_GENERATORS_H_

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include <rapidcheck.h>

#include "core/cp_plan.h"
#include "core/host_tensor.h"
#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_split.h"
#include "props/rc_status.h"

namespace kvshard::props {

// A CP batch: geometry, per-request extend/prefix lengths (prefixes page-aligned) and a payload row width.
struct CPBatchCase {
  int64_t cp_size = 1;
  int64_t page_size = 2;
  Int64List extend_lens;
  Int64List prefix_lens;
  int64_t row_bytes = 8;
};

inline void showValue(const CPBatchCase& c, std::ostream& os) {
  os << "cp_size=" << c.cp_size << " page_size=" << c.page_size << " extend_lens=";
  rc::show(c.extend_lens, os);
  os << " prefix_lens=";
  rc::show(c.prefix_lens, os);
  os << " row_bytes=" << c.row_bytes;
}

// N in 1..8 biased to 1, 2 and 8.
inline rc::Gen<int64_t> GenCpSize() {
  return rc::gen::weightedOneOf<int64_t>(
      {{3, rc::gen::element<int64_t>(1, 2, 8)}, {5, rc::gen::inRange<int64_t>(1, 9)}});
}

// ps in [min_ps, 128], biased to small and power-of-two sizes.
inline rc::Gen<int64_t> GenPageSize(int64_t min_ps) {
  return rc::gen::weightedOneOf<int64_t>(
      {{3, rc::gen::suchThat(rc::gen::element<int64_t>(1, 2, 3, 16, 64, 128), [=](int64_t p) { return p >= min_ps; })},
       {2, rc::gen::inRange<int64_t>(min_ps, 129)}});
}

// One extend length: often shorter than 2N pages, often whole pages, sometimes long (<= 3000 tokens).
inline rc::Gen<int64_t> GenExtendLen(int64_t cp_size, int64_t page_size) {
  const int64_t two_n_pages = 2 * cp_size * page_size;
  return rc::gen::weightedOneOf<int64_t>({
      {3, rc::gen::inRange<int64_t>(1, std::min<int64_t>(two_n_pages, 3000) + 1)},
      {2, rc::gen::map(rc::gen::inRange<int64_t>(1, 3000 / page_size + 1), [=](int64_t k) { return k * page_size; })},
      {1, rc::gen::element<int64_t>(1, page_size, page_size + 1,
                                    cp_size * page_size - 1 > 0 ? cp_size * page_size - 1 : 1)},
      {2, rc::gen::inRange<int64_t>(1, 3001)},
  });
}

// A ragged batch of 1..8 requests (one request a third of the time) with page sizes >= min_ps.
inline rc::Gen<CPBatchCase> GenCPBatchCase(int64_t min_ps = 2) {
  return rc::gen::exec([=] {
    CPBatchCase c;
    c.cp_size = *GenCpSize();
    c.page_size = *GenPageSize(min_ps);
    const int64_t batch =
        *rc::gen::weightedOneOf<int64_t>({{1, rc::gen::just<int64_t>(1)}, {2, rc::gen::inRange<int64_t>(1, 9)}});
    for (int64_t q = 0; q < batch; ++q) {
      c.extend_lens.push_back(*GenExtendLen(c.cp_size, c.page_size));
      c.prefix_lens.push_back(c.page_size * *rc::gen::inRange<int64_t>(0, 4));
    }
    c.row_bytes = *rc::gen::element<int64_t>(8, 12, 16, 17, 24);
    return c;
  });
}

// Rank `rank`'s batch plan of `c`; an unexpected error fails the property with its message.
inline CPSharedKVBatchPlan RankPlan(const CPBatchCase& c, int64_t rank) {
  return RC_VALUE(ref::BuildBatchPageAlignedInSeqSplitPlan(c.extend_lens, c.prefix_lens, c.page_size, c.cp_size, rank));
}

// Every rank's batch plan of `c`, in rank order.
inline std::vector<CPSharedKVBatchPlan> AllRankPlans(const CPBatchCase& c) {
  std::vector<CPSharedKVBatchPlan> plans;
  for (int64_t r = 0; r < c.cp_size; ++r) plans.push_back(RankPlan(c, r));
  return plans;
}

// One request for the single-request splitter: extend (0 included), prefix (aligned, empty or misaligned),
// trailing padding (total_len - extend_len) and geometry (ps = 1 included).
struct SingleSplitCase {
  int64_t cp_size = 1;
  int64_t page_size = 2;
  int64_t extend_len = 1;
  int64_t prefix_len = 0;
  int64_t padding = 0;
};

inline void showValue(const SingleSplitCase& c, std::ostream& os) {
  os << "cp_size=" << c.cp_size << " page_size=" << c.page_size << " extend_len=" << c.extend_len
     << " prefix_len=" << c.prefix_len << " padding=" << c.padding;
}

// Page-aligned inputs (the batch planner's domain) and fallback cases (ps = 1, empty extend, misaligned prefix).
inline rc::Gen<SingleSplitCase> GenSingleSplitCase() {
  return rc::gen::exec([] {
    SingleSplitCase c;
    c.cp_size = *GenCpSize();
    c.page_size = *GenPageSize(1);
    c.extend_len =
        *rc::gen::weightedOneOf<int64_t>({{1, rc::gen::just<int64_t>(0)}, {12, GenExtendLen(c.cp_size, c.page_size)}});
    c.prefix_len = c.page_size * *rc::gen::inRange<int64_t>(0, 4);
    if (c.page_size > 1 && *rc::gen::inRange(0, 10) == 0) {
      c.prefix_len += *rc::gen::inRange<int64_t>(1, c.page_size);  // misaligned: the splitter falls back
    }
    c.padding =
        *rc::gen::weightedOneOf<int64_t>({{3, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, 64)}});
    return c;
  });
}

// The id a payload row carries: (request + 1) << 32 | (token + 1); 0 marks padding rows.
inline int64_t RowId(int64_t request, int64_t token) { return ((request + 1) << 32) | (token + 1); }

// Writes `id` into the first 8 bytes of a row and a pattern derived from it into the rest.
inline void WriteRow(uint8_t* row, int64_t row_bytes, int64_t id) {
  std::memcpy(row, &id, 8);
  for (int64_t b = 8; b < row_bytes; ++b)
    row[b] = static_cast<uint8_t>((id * 0x9E3779B97F4A7C15ULL) >> (b % 8 * 8)) ^ b;
}

// The id of a row.
inline int64_t ReadId(const HostTensor& t, int64_t row) {
  int64_t id;
  std::memcpy(&id, t.row(row), 8);
  return id;
}

// The flattened batch payload: row of (request q, token t) carries RowId(q, t).
inline HostTensor Payload(const Int64List& extend_lens, int64_t row_bytes) {
  int64_t total = 0;
  for (int64_t e : extend_lens) total += e;
  HostTensor x = HostTensor::Zeros(total, row_bytes);
  int64_t row = 0;
  for (size_t q = 0; q < extend_lens.size(); ++q) {
    for (int64_t t = 0; t < extend_lens[q]; ++t) WriteRow(x.row(row++), row_bytes, RowId(q, t));
  }
  return x;
}

// Segment of every position of a request under `split` (positions past the split total are absent).
inline Int64List SegmentOfPosition(std::span<const int64_t> split) {
  Int64List seg;
  for (size_t s = 0; s < split.size(); ++s) seg.insert(seg.end(), split[s], static_cast<int64_t>(s));
  return seg;
}

}  // namespace kvshard::props

#endif  // KVSHARD_PROPS_CP_GENERATORS_H_
