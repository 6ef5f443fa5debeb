// Properties of the seed 003 CP shared-KV direct writes and helpers: direct-write locs are the valid split of
// out_cache_loc (trash slots kept, never owner-checked), owner-class allocation never fails the owner check, the
// cyclic allocator fails exactly on the pages FindDirectWriteOwnerMismatches reports, the derived compute owners
// are the split plans' segment owners, the local pair split recombines, every reason tag is reachable and leaves
// the batch unchanged, calculate_cp_seq_idx partitions the sequences.
#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "cpu_ref/allocator.h"
#include "cpu_ref/cp_helpers.h"
#include "cpu_ref/cp_shared_kv.h"
#include "cpu_ref/cp_split.h"
#include "props/cp_generators.h"
#include "props/property.h"

namespace kvshard::props {
namespace {

int64_t Pages(int64_t extend, int64_t ps) { return (extend + ps - 1) / ps; }

// Extent pages of every request, distinct and >= N: page j of request q from class classes[q][j].
std::vector<Int64List> PagesFromClasses(const std::vector<Int64List>& classes, int64_t cp_size) {
  Int64List next(static_cast<size_t>(cp_size), 1);
  std::vector<Int64List> pages;
  for (const Int64List& req : classes) {
    pages.emplace_back();
    for (int64_t c : req) pages.back().push_back(next[c]++ * cp_size + c);
  }
  return pages;
}

std::vector<Int64List> OwnerClasses(const CPBatchCase& c) {
  std::vector<Int64List> classes;
  for (size_t q = 0; q < c.extend_lens.size(); ++q) {
    classes.push_back(RC_VALUE(StatusOr<Int64List>(
        ref::BuildInSeqPageComputeOwners(c.extend_lens[q], c.prefix_lens[q], c.page_size, c.cp_size).value())));
  }
  return classes;
}

std::vector<Int64List> CyclicClasses(const CPBatchCase& c, const Int64List& bases) {
  std::vector<Int64List> classes;
  for (size_t q = 0; q < c.extend_lens.size(); ++q) {
    classes.push_back(ref::CyclicPageClasses(bases[q], c.prefix_lens[q], c.page_size, c.cp_size,
                                             Pages(c.extend_lens[q], c.page_size)));
  }
  return classes;
}

ref::CpSharedKVForwardBatch Batch(const CPBatchCase& c, int64_t rank, const Int64List& out_cache_loc) {
  ref::CpSharedKVForwardBatch b;
  b.uses_cp_shared_kv = true;
  b.nsa_cp_metadata = RC_VALUE(ref::BuildBatchMetadataFromPlan(RankPlan(c, rank)));
  b.cp_shared_kv_layout = ref::CpSharedKVLayout{c.cp_size, rank, c.page_size};
  b.out_cache_loc = out_cache_loc;
  return b;
}

// The bs = 1 path of a one-request case: scalar metadata of the page-aligned split, no batch plan.
ref::CpSharedKVForwardBatch ScalarBatch(const CPBatchCase& c, int64_t rank, const Int64List& out_cache_loc) {
  ref::CpSharedKVForwardBatch b = Batch(c, rank, out_cache_loc);
  const ref::InSeqSplit split = RC_VALUE(ref::BuildPageAlignedInSeqSplitList(c.extend_lens[0], c.extend_lens[0],
                                                                             c.prefix_lens[0], c.page_size, c.cp_size));
  b.nsa_cp_metadata = RC_VALUE(ref::BuildScalarCPMetadata(split, c.cp_size, rank));
  return b;
}

// Rank r's rows of `values` (one per token): per request, segment r then 2N-1-r of the valid split.
Int64List NaiveValidSplit(const CPSharedKVBatchPlan& p, const Int64List& values) {
  Int64List out;
  for (int64_t q = 0; q < p.batch_size; ++q) {
    const Int64List seg = SegmentOfPosition(p.request_split_lists[q]);
    for (int64_t s : {p.cp_rank, 2 * p.cp_size - 1 - p.cp_rank}) {
      for (size_t t = 0; t < seg.size(); ++t) {
        if (seg[t] == s) out.push_back(values[p.request_token_offsets[q] + t]);
      }
    }
  }
  return out;
}

KVSHARD_PROP(CpSharedKVProps, DirectWriteLocsAreTheValidSplitAndOwnerClassesNeverFail, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  Int64List locs =
      RC_VALUE(ref::OutCacheLocFromPages(c.extend_lens, PagesFromClasses(OwnerClasses(c), c.cp_size), c.page_size));
  const int64_t valid_tokens = static_cast<int64_t>(locs.size());
  for (int64_t& loc : locs) {  // trash (0) and padding (< 0) slots: kept in the split, never owner-checked
    if (*rc::gen::inRange(0, 8) == 0) loc = *rc::gen::element<int64_t>(0, -1);
  }
  const int64_t static_rows =
      *rc::gen::weightedOneOf<int64_t>({{3, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, 9)}});
  Int64List padded = locs;
  padded.insert(padded.end(), static_cast<size_t>(static_rows), *rc::gen::element<int64_t>(0, 3, -1));
  RC_CLASSIFY(static_rows > 0, "trailing static padding");
  for (int64_t r = 0; r < c.cp_size; ++r) {
    ref::CpSharedKVForwardBatch b = Batch(c, r, padded);
    if (static_rows > 0) b.extend_num_tokens = valid_tokens + static_rows + *rc::gen::inRange<int64_t>(0, 3);
    const Int64List local = *RC_VALUE(ref::GetCpSharedKVLocalOutCacheLoc(&b));
    const CPSharedKVBatchPlan& plan = *b.nsa_cp_metadata->batch_plan;
    RC_ASSERT(local == NaiveValidSplit(plan, locs));
    RC_ASSERT(static_cast<int64_t>(local.size()) ==
              plan.request_rank_local_offsets.back() + plan.request_rank_local_tokens.back());
    const Int64List physical = *RC_VALUE(ref::GetCpSharedKVLocalPhysicalOutCacheLoc(&b));
    if (c.extend_lens.size() == 1) {  // the bs = 1 path (split_list, zigzag_index) writes the same locs
      ref::CpSharedKVForwardBatch scalar = ScalarBatch(c, r, padded);
      scalar.extend_num_tokens = b.extend_num_tokens;
      RC_ASSERT(*RC_VALUE(ref::GetCpSharedKVLocalOutCacheLoc(&scalar)) == local);
    }
    std::set<int64_t> seen;
    for (size_t i = 0; i < local.size(); ++i) {
      if (local[i] <= 0) {
        RC_ASSERT(physical[i] == local[i]);
        continue;
      }
      RC_ASSERT((local[i] / c.page_size) % c.cp_size == r);
      RC_ASSERT(physical[i] % c.page_size == local[i] % c.page_size);
      RC_ASSERT(physical[i] / c.page_size == local[i] / c.page_size / c.cp_size);
      RC_ASSERT(seen.insert(physical[i]).second);  // distinct logical locs -> distinct physical rows
    }
  }
}

KVSHARD_PROP(CpSharedKVProps, CyclicAllocatorFailsExactlyOnReportedPages, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  Int64List bases;
  for (size_t q = 0; q < c.extend_lens.size(); ++q) bases.push_back(*rc::gen::inRange<int64_t>(0, c.cp_size));
  const std::vector<Int64List> pages = PagesFromClasses(CyclicClasses(c, bases), c.cp_size);
  const Int64List locs = RC_VALUE(ref::OutCacheLocFromPages(c.extend_lens, pages, c.page_size));
  const std::vector<ref::DirectWriteOwnerMismatch> mismatches =
      RC_VALUE(ref::FindDirectWriteOwnerMismatches(RankPlan(c, 0), pages));
  RC_CLASSIFY(mismatches.empty(), "cyclic allocation happens to match the owners");
  for (int64_t r = 0; r < c.cp_size; ++r) {
    // Brute force: logical pages among rank r's valid-split locs that another rank owns.
    std::set<int64_t> foreign;
    for (int64_t loc : NaiveValidSplit(RankPlan(c, r), locs)) {
      if ((loc / c.page_size) % c.cp_size != r) foreign.insert(loc / c.page_size);
    }
    std::set<int64_t> reported;
    for (const auto& m : mismatches) {
      RC_ASSERT(m.logical_page == pages[m.request][m.page]);
      RC_ASSERT(m.page_owner == m.logical_page % c.cp_size);
      if (m.compute_owner == r) reported.insert(m.logical_page);
    }
    RC_ASSERT(foreign == reported);
    ref::CpSharedKVForwardBatch b = Batch(c, r, locs);
    const auto result = ref::GetCpSharedKVLocalOutCacheLoc(&b);
    RC_ASSERT(result.ok() == reported.empty());
    if (!result.ok()) {
      RC_ASSERT(result.status().message().find("reason=local_loc_owner_mismatch") != std::string::npos);
    }
  }
}

// Owner-plan allocation: every new page from its compute owner's class. The batch commits iff every class has
// its owners' page count (else it defers, class counts unchanged); committed pages never fail a direct write, and
// each class gives exactly its owner histogram (the skew the rotated allocator would have spread evenly).
KVSHARD_PROP(CpSharedKVProps, OwnerPlanAllocationCommitsIffClassesSufficeAndNeverFailsDirectWrites, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const std::vector<Int64List> owners = OwnerClasses(c);
  Int64List need(static_cast<size_t>(c.cp_size), 0);
  for (const Int64List& req : owners) {
    for (int64_t o : req) ++need[o];
  }
  const int64_t most = *std::max_element(need.begin(), need.end());
  const int64_t slack = *rc::gen::weightedOneOf<int64_t>(  // mostly enough pages, sometimes one or two short
      {{3, rc::gen::element<int64_t>(0, 1, 5)}, {1, rc::gen::element<int64_t>(-1, -2)}});
  ref::AllocatorConfig config{c.cp_size, c.page_size, most + slack, false, false};
  config.need_sort = *rc::gen::arbitrary<bool>();
  config.pages_per_rank = std::max<int64_t>(config.pages_per_rank, 0);
  ref::PageInterleaveAllocator a = RC_VALUE(ref::PageInterleaveAllocator::Create(config));
  AllocBatch batch;
  for (size_t q = 0; q < c.extend_lens.size(); ++q) {
    batch.prefix_lens.push_back(c.prefix_lens[q]);
    batch.seq_lens.push_back(c.prefix_lens[q] + c.extend_lens[q]);
    batch.rotation_bases.push_back(kNewChain);
    batch.last_locs.push_back(0);
  }
  const Int64List before = a.class_free_page_counts();
  ref::ExtendPages pages;
  const bool committed = RC_VALUE(a.AllocExtendByClasses(batch, owners, &pages));
  RC_CLASSIFY(!committed, "deferred");
  RC_ASSERT(committed == (most <= config.pages_per_rank));
  const Int64List after = a.class_free_page_counts();
  for (int64_t k = 0; k < c.cp_size; ++k) RC_ASSERT(before[k] - after[k] == (committed ? need[k] : 0));
  if (!committed) return;
  std::vector<Int64List> extent;
  for (size_t q = 0; q + 1 < pages.offsets.size(); ++q) {
    extent.emplace_back(pages.pages.begin() + pages.offsets[q], pages.pages.begin() + pages.offsets[q + 1]);
  }
  RC_ASSERT(RC_VALUE(ref::FindDirectWriteOwnerMismatches(RankPlan(c, 0), extent)).empty());
  const Int64List locs = RC_VALUE(ref::OutCacheLocFromPages(c.extend_lens, extent, c.page_size));
  for (int64_t r = 0; r < c.cp_size; ++r) {
    ref::CpSharedKVForwardBatch b = Batch(c, r, locs);
    RC_ASSERT_OK(ref::GetCpSharedKVLocalOutCacheLoc(&b).status());
  }
}

KVSHARD_PROP(CpSharedKVProps, ComputeOwnersAreTheSegmentOwnersOfBothSplits, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const CPSharedKVBatchPlan p = RankPlan(c, 0);
  const Int64List flat = RC_VALUE(ref::BuildFlatPageOwnerPlan(p));
  size_t k = 0;
  const int64_t segments = 2 * c.cp_size;
  for (int64_t q = 0; q < p.batch_size; ++q) {
    const int64_t first = c.prefix_lens[q] / c.page_size, pages = p.request_padded_pages[q];
    for (int64_t page = first; page < first + pages; ++page, ++k) {
      for (int64_t s = 0; s < segments; ++s) {
        const int64_t rank = s < c.cp_size ? s : segments - 1 - s;
        if (p.request_segment_page_starts[q][s] <= page && page < p.request_segment_page_ends[q][s]) {
          RC_ASSERT(flat[k] == rank);
        }
        if (p.request_compute_segment_page_starts[q][s] <= page && page < p.request_compute_segment_page_ends[q][s]) {
          RC_ASSERT(flat[k] == rank);
        }
      }
    }
  }
  RC_ASSERT(k == flat.size());
}

KVSHARD_PROP(CpSharedKVProps, LocalPairSplitRecombinesToTheRanksRows, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const HostTensor x = Payload(c.extend_lens, c.row_bytes);
  const int64_t r = *rc::gen::inRange<int64_t>(0, c.cp_size);
  const CPSharedKVBatchPlan p = RankPlan(c, r);
  const HostTensor local = RC_VALUE(ref::SplitTensorByCPBatchPlan(x, p, ref::SplitMode::kData, SplitKind::kValid));
  for (int64_t q = 0; q < p.batch_size; ++q) {
    const int64_t prev = p.request_valid_actual_seq_q_prev[q], next = p.request_valid_actual_seq_q_next[q];
    const HostTensor rows = RC_VALUE(ref::IndexRows(local, [&] {
      Int64List idx;
      for (int64_t i = 0; i < p.request_rank_local_tokens[q]; ++i) idx.push_back(p.request_rank_local_offsets[q] + i);
      return idx;
    }()));
    const auto [a, b] = RC_VALUE(ref::SplitInSeqCpLocalPair(rows, prev, next));
    RC_ASSERT(RC_VALUE(ref::ConcatRows({a, b})) == rows);
    RC_ASSERT(a.rows == p.request_split_lists[q][r]);
    RC_ASSERT(b.rows == p.request_split_lists[q][2 * c.cp_size - 1 - r]);
    if (a.rows > 0) RC_ASSERT(ReadId(a, 0) == RowId(q, p.flat_segment_offsets[q * 2 * c.cp_size + r]));
    if (b.rows > 0) {
      RC_ASSERT(ReadId(b, 0) == RowId(q, p.flat_segment_offsets[q * 2 * c.cp_size + 2 * c.cp_size - 1 - r]));
    }
    const int64_t off = *rc::gen::element<int64_t>(-1, 1);
    RC_ASSERT(!ref::SplitInSeqCpLocalPair(rows, prev, next + off).ok());
  }
}

// A corruption of a valid direct-write batch and the reason tag it must produce.
struct Corruption {
  const char* tag;
  void (*apply)(ref::CpSharedKVForwardBatch*);
};

const Corruption kCorruptions[] = {
    {"missing_metadata", [](ref::CpSharedKVForwardBatch* b) { b->nsa_cp_metadata.reset(); }},
    {"missing_layout", [](ref::CpSharedKVForwardBatch* b) { b->cp_shared_kv_layout.reset(); }},
    {"missing_out_cache_loc", [](ref::CpSharedKVForwardBatch* b) { b->out_cache_loc.reset(); }},
    {"not_page_aligned", [](ref::CpSharedKVForwardBatch* b) { b->nsa_cp_metadata->info.page_aligned = false; }},
    {"not_in_seq_split",
     [](ref::CpSharedKVForwardBatch* b) { b->server_args.nsa_prefill_cp_mode = "round-robin-split"; }},
    {"not_in_seq_split",
     [](ref::CpSharedKVForwardBatch* b) { b->server_args.enable_nsa_prefill_context_parallel = false; }},
    {"batch_split_out_cache_len_mismatch", [](ref::CpSharedKVForwardBatch* b) { b->out_cache_loc->push_back(0); }},
    {"batch_split_out_cache_len_mismatch", [](ref::CpSharedKVForwardBatch* b) { b->out_cache_loc->pop_back(); }},
    {"batch_split_out_cache_len_mismatch",  // more static rows than extend_num_tokens allows
     [](ref::CpSharedKVForwardBatch* b) {
       b->extend_num_tokens = static_cast<int64_t>(b->out_cache_loc->size()) + 1;
       b->out_cache_loc->insert(b->out_cache_loc->end(), {0, 0});
     }},
    {"local_loc_owner_mismatch",  // every loc shifted one page: page p -> p + 1 lives on the next rank
     [](ref::CpSharedKVForwardBatch* b) {
       for (int64_t& loc : *b->out_cache_loc) loc += b->cp_shared_kv_layout->page_size;
     }},
};

KVSHARD_PROP(CpSharedKVProps, EveryReasonTagIsReachableAndLeavesTheBatchUnchanged, ()) {
  CPBatchCase c = *GenCPBatchCase();
  if (c.cp_size == 1) c.cp_size = 2;  // the owner mismatch needs a second rank
  const std::vector<Int64List> pages = PagesFromClasses(OwnerClasses(c), c.cp_size);
  const Int64List locs = RC_VALUE(ref::OutCacheLocFromPages(c.extend_lens, pages, c.page_size));
  std::vector<size_t> ids(std::size(kCorruptions));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i;
  const Corruption& k = kCorruptions[*rc::gen::elementOf(ids)];  // uniform over the corruptions
  // The owner mismatch needs a rank holding rows: choose one whose local valid rows are not empty.
  int64_t r = *rc::gen::inRange<int64_t>(0, c.cp_size);
  while (RankPlan(c, r).request_rank_local_offsets.back() + RankPlan(c, r).request_rank_local_tokens.back() == 0) {
    r = (r + 1) % c.cp_size;
  }
  const bool scalar = c.extend_lens.size() == 1 && *rc::gen::arbitrary<bool>();
  ref::CpSharedKVForwardBatch b = scalar ? ScalarBatch(c, r, locs) : Batch(c, r, locs);
  k.apply(&b);
  const ref::CpSharedKVForwardBatch before = b;
  const std::string tag =
      scalar && std::string(k.tag) == "batch_split_out_cache_len_mismatch" ? "split_out_cache_len_mismatch" : k.tag;
  RC_TAG(tag);
  const bool physical = *rc::gen::arbitrary<bool>();
  const Status s = physical ? ref::GetCpSharedKVLocalPhysicalOutCacheLoc(&b).status()
                            : ref::GetCpSharedKVLocalOutCacheLoc(&b).status();
  RC_ASSERT(s.message().rfind(std::string("[CP_SHARED_KV_FAIL_FAST][direct_write] reason=") + tag + " ", 0) == 0);
  RC_ASSERT(b.out_cache_loc == before.out_cache_loc);
  RC_ASSERT(!b.cp_local_out_cache_loc && !b.cp_local_physical_out_cache_loc && b.direct_write_fallbacks.empty());
  RC_ASSERT(b.extend_num_tokens == before.extend_num_tokens);
}

KVSHARD_PROP(CpSharedKVProps, CalculateCpSeqIdxPartitionsTheSequences, ()) {
  const Int64List seqs = *rc::gen::container<Int64List>(rc::gen::inRange<int64_t>(0, 40));
  int64_t total = 0;
  for (int64_t s : seqs) total += s;
  // Chunks: a random partition of the total (zero-length chunks included).
  Int64List chunks;
  for (int64_t left = total; left > 0;) {
    const int64_t len = std::min(left, *rc::gen::inRange<int64_t>(0, 30));
    chunks.push_back(len);
    left -= len;
  }
  const auto spans = RC_VALUE(ref::CalculateCpSeqIdx(chunks, seqs));
  RC_ASSERT(spans.size() == chunks.size());
  Int64List covered(seqs.size(), 0);
  for (size_t i = 0; i < spans.size(); ++i) {
    int64_t chunk_tokens = 0;
    for (const ref::CpSeqSpan& s : spans[i]) {
      RC_ASSERT(s.start == covered[s.seq_idx]);  // contiguous, in order
      covered[s.seq_idx] = s.end;
      chunk_tokens += s.end - s.start;
    }
    RC_ASSERT(chunk_tokens == chunks[i]);
  }
  for (size_t q = 0; q < seqs.size(); ++q) {
    if (seqs[q] > 0) RC_ASSERT(covered[q] == seqs[q]);
  }
}

KVSHARD_PROP(CpSharedKVProps, EmbeddingPaddingReachesMaxRankLen, ()) {
  const CPBatchCase c = *GenCPBatchCase();
  const int64_t r = *rc::gen::inRange<int64_t>(0, c.cp_size);
  const NSAContextParallelMetadata m = RC_VALUE(ref::BuildBatchMetadataFromPlan(RankPlan(c, r)));
  const int64_t local = m.per_rank_actual_token[r];
  const Int64List ids = *rc::gen::container<Int64List>(static_cast<size_t>(local), rc::gen::inRange<int64_t>(1, 100));
  const Int64List padded = RC_VALUE(StatusOr<Int64List>(*ref::PadCpLocalInputIdsForEmbedding(&m, ids, 0)));
  RC_ASSERT(static_cast<int64_t>(padded.size()) == m.max_rank_token());
  RC_ASSERT(std::equal(ids.begin(), ids.end(), padded.begin()));
  RC_ASSERT(std::all_of(padded.begin() + local, padded.end(), [](int64_t v) { return v == 0; }));
  Int64List longer(static_cast<size_t>(m.max_rank_token() + 1), 1);
  RC_ASSERT(!ref::PadCpLocalInputIdsForEmbedding(&m, longer).has_value());
}

}  // namespace
}  // namespace kvshard::props
