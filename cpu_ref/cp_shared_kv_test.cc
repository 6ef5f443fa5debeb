// Worked examples of the CP shared-KV direct-write path and the page owner plan (docs/split-plans.md example:
// cp 2, ps 4, extends 5,37,3, prefixes 0,16,8), one test per reason tag.
#include "cpu_ref/cp_shared_kv.h"

#include <gtest/gtest.h>

#include "cpu_ref/cp_split.h"

namespace kvshard::ref {
namespace {

const Int64List kExtend = {5, 37, 3};
const Int64List kPrefix = {0, 16, 8};
// Extent pages drawn from their compute owner's class (owners 0,1 | 0,0,0,1,1,1,1,1,0,0 | 0).
const std::vector<Int64List> kOwnerPages = {{2, 3}, {4, 6, 8, 5, 7, 9, 11, 13, 10, 12}, {14}};

Int64List Range(int64_t begin, int64_t end) {
  Int64List v;
  for (int64_t x = begin; x < end; ++x) v.push_back(x);
  return v;
}

Int64List Cat(std::initializer_list<Int64List> parts) {
  Int64List v;
  for (const Int64List& p : parts) v.insert(v.end(), p.begin(), p.end());
  return v;
}

CpSharedKVForwardBatch Batch(int64_t rank, const std::vector<Int64List>& pages = kOwnerPages) {
  CPSharedKVBatchPlan plan = BuildBatchPageAlignedInSeqSplitPlan(kExtend, kPrefix, 4, 2, rank).value();
  CpSharedKVForwardBatch b;
  b.uses_cp_shared_kv = true;
  b.nsa_cp_metadata = BuildBatchMetadataFromPlan(std::move(plan)).value();
  b.cp_shared_kv_layout = CpSharedKVLayout{2, rank, 4};
  b.out_cache_loc = OutCacheLocFromPages(kExtend, pages, 4).value();
  return b;
}

std::string Error(CpSharedKVForwardBatch b) {
  const CpSharedKVForwardBatch before = b;
  StatusOr<std::optional<Int64List>> r = GetCpSharedKVLocalPhysicalOutCacheLoc(&b);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(b.cp_local_out_cache_loc.has_value());  // state unchanged on error
  EXPECT_FALSE(b.cp_local_physical_out_cache_loc.has_value());
  return r.ok() ? "" : r.status().message();
}

TEST(CpSharedKVTest, FlatPageOwnerPlanOfTheWorkedExample) {
  const CPSharedKVBatchPlan plan = BuildBatchPageAlignedInSeqSplitPlan(kExtend, kPrefix, 4, 2, 0).value();
  EXPECT_EQ(BuildFlatPageOwnerPlan(plan).value(), (Int64List{0, 1, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(BuildInSeqPageComputeOwners(0, 0, 4, 2).value(), Int64List{});
  EXPECT_EQ(BuildInSeqPageComputeOwners(9, 0, 1, 1).value(), Int64List(9, 0));
  EXPECT_FALSE(BuildInSeqPageComputeOwners(5, 3, 4, 2).has_value());
}

TEST(CpSharedKVTest, OwnerPlanUnavailableTag) {
  CPSharedKVBatchPlan plan = BuildBatchPageAlignedInSeqSplitPlan(kExtend, kPrefix, 4, 2, 0).value();
  plan.request_prefix_lens[1] = 17;
  const Status s = BuildFlatPageOwnerPlan(plan).status();
  EXPECT_EQ(s.message(),
            "[CP_SHARED_KV_FAIL_FAST][batch_gt1_page_owner_plan_unavailable] req_id=1 extend_len=37 prefix_len=17 "
            "page_size=4 cp_size=2");
}

TEST(CpSharedKVTest, Rank1LogicalAndPhysicalLocs) {
  CpSharedKVForwardBatch b = Batch(1);
  const Int64List logical = Cat({{12}, Range(20, 24), Range(28, 32), Range(36, 40), Range(44, 48), Range(52, 56)});
  EXPECT_EQ(GetCpSharedKVLocalOutCacheLoc(&b).value().value(), logical);
  EXPECT_EQ(GetCpSharedKVLocalPhysicalOutCacheLoc(&b).value().value(), Cat({{4}, Range(8, 28)}));
  EXPECT_EQ(b.cp_local_out_cache_loc.value(), logical);
}

TEST(CpSharedKVTest, TrailingStaticPaddingIsDroppedOnlyUpToExtendNumTokens) {
  CpSharedKVForwardBatch b = Batch(0);
  b.out_cache_loc->insert(b.out_cache_loc->end(), {0, 0});
  b.extend_num_tokens = 47;
  const std::optional<Int64List> padded = GetCpSharedKVLocalOutCacheLoc(&b).value();
  CpSharedKVForwardBatch plain = Batch(0);
  EXPECT_EQ(padded, GetCpSharedKVLocalOutCacheLoc(&plain).value());
  CpSharedKVForwardBatch over = Batch(0);
  over.out_cache_loc->insert(over.out_cache_loc->end(), {0, 0, 0});
  over.extend_num_tokens = 47;
  EXPECT_EQ(Error(over),
            "[CP_SHARED_KV_FAIL_FAST][direct_write] reason=batch_split_out_cache_len_mismatch "
            "split_list tokens=45 out_cache_loc tokens=48 static_padded=47");
  CpSharedKVForwardBatch short_locs = Batch(0);
  short_locs.out_cache_loc->pop_back();
  short_locs.extend_num_tokens = 47;
  EXPECT_EQ(Error(short_locs),
            "[CP_SHARED_KV_FAIL_FAST][direct_write] reason=batch_split_out_cache_len_mismatch "
            "split_list tokens=45 out_cache_loc tokens=44 static_padded=47");
}

TEST(CpSharedKVTest, EveryReasonTag) {
  const std::string prefix = "[CP_SHARED_KV_FAIL_FAST][direct_write] reason=";
  CpSharedKVForwardBatch b = Batch(0);
  b.nsa_cp_metadata.reset();
  EXPECT_EQ(Error(b), prefix + "missing_metadata nsa_cp_metadata is missing");
  b = Batch(0);
  b.cp_shared_kv_layout.reset();
  EXPECT_EQ(Error(b), prefix + "missing_layout cp_shared_kv_layout is missing");
  b = Batch(0);
  b.out_cache_loc.reset();
  EXPECT_EQ(Error(b), prefix + "missing_out_cache_loc out_cache_loc is missing");
  b = Batch(0);
  b.nsa_cp_metadata->info.page_aligned = false;
  EXPECT_EQ(Error(b), prefix + "not_page_aligned metadata is not page-aligned: page_size=4 extend_prefix_len=0");
  b = Batch(0);
  b.server_args.nsa_prefill_cp_mode = "round-robin-split";
  EXPECT_EQ(Error(b), prefix + "not_in_seq_split nsa_prefill_cp_mode is not in-seq-split");
  b = Batch(0);
  b.out_cache_loc->push_back(0);
  EXPECT_EQ(Error(b), prefix +
                          "batch_split_out_cache_len_mismatch split_list tokens=45 out_cache_loc tokens=46 "
                          "static_padded=None");
  std::vector<Int64List> swapped = kOwnerPages;
  std::swap(swapped[1][0], swapped[1][3]);  // page 0 of request 1 (owner 0) now on class 1
  EXPECT_EQ(Error(Batch(0, swapped)), prefix +
                                          "local_loc_owner_mismatch local out_cache_loc contains pages not "
                                          "owned by this rank: cp_rank=0 cp_size=2 page_size=4");
  EXPECT_EQ(Error(Batch(1, swapped)), prefix +
                                          "local_loc_owner_mismatch local out_cache_loc contains pages not "
                                          "owned by this rank: cp_rank=1 cp_size=2 page_size=4");
}

TEST(CpSharedKVTest, TrashLocsSkipTheOwnerCheck) {
  std::vector<Int64List> trash = kOwnerPages;
  trash[1][3] = 0;  // page 3 of request 1 (owner 1) at the trash page: locs 0..3, only loc 0 is skipped
  CpSharedKVForwardBatch on_trash_page = Batch(1, trash);
  EXPECT_FALSE(GetCpSharedKVLocalOutCacheLoc(&on_trash_page).ok());
  CpSharedKVForwardBatch b = Batch(1);
  (*b.out_cache_loc)[17] = 0;   // token 12 of request 1, rank 1's first row of that request
  (*b.out_cache_loc)[18] = -1;  // negative padding slot
  const Int64List local = GetCpSharedKVLocalOutCacheLoc(&b).value().value();
  EXPECT_EQ(local[1], 0);
  EXPECT_EQ(local[2], -1);
  const Int64List physical = GetCpSharedKVLocalPhysicalOutCacheLoc(&b).value().value();
  EXPECT_EQ(physical[1], 0);
  EXPECT_EQ(physical[2], -1);
}

TEST(CpSharedKVTest, ScalarPathSplitsBySplitList) {
  const InSeqSplit split = BuildPageAlignedInSeqSplitList(10, 10, 0, 4, 2).value();
  ASSERT_EQ(split.split_list, (Int64List{4, 4, 2, 0}));
  CpSharedKVForwardBatch b;
  b.uses_cp_shared_kv = true;
  b.nsa_cp_metadata = BuildScalarCPMetadata(split, 2, 1).value();
  b.cp_shared_kv_layout = CpSharedKVLayout{2, 1, 4};
  b.out_cache_loc = OutCacheLocFromPages({10}, {{2, 3, 5}}, 4).value();
  EXPECT_EQ(GetCpSharedKVLocalOutCacheLoc(&b).value().value(), Cat({Range(12, 16), {20, 21}}));
  EXPECT_EQ(GetCpSharedKVLocalPhysicalOutCacheLoc(&b).value().value(), Cat({Range(4, 8), {8, 9}}));
  CpSharedKVForwardBatch bad = b;
  bad.cp_local_out_cache_loc.reset();
  bad.cp_local_physical_out_cache_loc.reset();
  bad.out_cache_loc->pop_back();
  EXPECT_EQ(Error(bad),
            "[CP_SHARED_KV_FAIL_FAST][direct_write] reason=split_out_cache_len_mismatch split_list "
            "tokens=10 out_cache_loc tokens=9 static_padded=None");
}

TEST(CpSharedKVTest, NonSharedBatchAndCachesAndFallback) {
  CpSharedKVForwardBatch b = Batch(0);
  b.uses_cp_shared_kv = false;
  EXPECT_FALSE(GetCpSharedKVLocalOutCacheLoc(&b).value().has_value());
  EXPECT_FALSE(GetCpSharedKVLocalPhysicalOutCacheLoc(&b).value().has_value());
  b.cp_local_out_cache_loc = Int64List{4, 5};  // a cached result wins, and without a layout the physical falls back
  b.cp_shared_kv_layout.reset();
  EXPECT_EQ(GetCpSharedKVLocalOutCacheLoc(&b).value().value(), (Int64List{4, 5}));
  EXPECT_FALSE(GetCpSharedKVLocalPhysicalOutCacheLoc(&b).value().has_value());
  ASSERT_EQ(b.direct_write_fallbacks.size(), 1u);
  EXPECT_NE(b.direct_write_fallbacks[0].find("reason=missing_layout"), std::string::npos);
}

TEST(CpSharedKVTest, CyclicAllocatorMismatchesAreReported) {
  const CPSharedKVBatchPlan plan = BuildBatchPageAlignedInSeqSplitPlan(kExtend, kPrefix, 4, 2, 0).value();
  EXPECT_TRUE(FindDirectWriteOwnerMismatches(plan, kOwnerPages).value().empty());
  // Request 0 with base 0 and no prefix: classes 0,1 = its owners; request 2 (prefix 2 pages, base 1): class 1.
  EXPECT_EQ(CyclicPageClasses(0, 0, 4, 2, 2), (Int64List{0, 1}));
  EXPECT_EQ(CyclicPageClasses(1, 8, 4, 2, 1), (Int64List{1}));
  const std::vector<Int64List> cyclic = {{2, 3}, {4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, {15}};
  const std::vector<DirectWriteOwnerMismatch> want = {
      {1, 1, 5, 0, 1}, {1, 4, 8, 1, 0}, {1, 6, 10, 1, 0}, {1, 9, 13, 0, 1}, {2, 0, 15, 0, 1}};
  EXPECT_EQ(FindDirectWriteOwnerMismatches(plan, cyclic).value(), want);
}

}  // namespace
}  // namespace kvshard::ref
