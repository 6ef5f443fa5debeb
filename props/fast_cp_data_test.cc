// cpu_fast/'s rerange against the reference (in props/: cpu_fast/ may not depend on cpu_ref/): its streaming-store
// path (outputs >= 32 MiB, out of reach of the properties' small batches) and its reused output buffer. Calls are
// qualified, fast:: or ref::, to name the implementation (HostTensor is kvshard's, so ADL picks neither).
#include "cpu_fast/cp_data.h"

#include <gtest/gtest.h>

#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_split.h"

namespace kvshard::fast {
namespace {

TEST(FastCpDataTest, LargeRerangeEqualsReference) {
  const CPSharedKVBatchPlan plan =
      ref::BuildBatchPageAlignedInSeqSplitPlan({5000, 3001, 1003}, {64, 0, 128}, 64, 4, 0).value();
  const NSAContextParallelMetadata m = ref::BuildBatchMetadataFromPlan(plan).value();
  for (int64_t width : {int64_t{4096}, int64_t{4101}}) {  // line-aligned rows and rows at every offset
    HostTensor gathered = HostTensor::Zeros(m.total_seq_lens, width);
    for (size_t i = 0; i < gathered.data.size(); ++i) gathered.data[i] = static_cast<uint8_t>(i * 131 + i / 4099);
    const HostTensor want = ref::BatchInSeqAllGatherRerange(gathered, m, 4).value();
    ASSERT_GE(want.data.size(), kStreamingCopyBytes);
    EXPECT_TRUE(fast::BatchInSeqAllGatherRerange(gathered, m, 4).value() == want) << "width " << width;
  }
}

TEST(FastCpDataTest, IntoReusesTheOutputAndMatchesReference) {
  const CPSharedKVBatchPlan plan = ref::BuildBatchPageAlignedInSeqSplitPlan({37, 5, 3}, {16, 0, 8}, 4, 2, 0).value();
  const NSAContextParallelMetadata m = ref::BuildBatchMetadataFromPlan(plan).value();
  HostTensor gathered = HostTensor::Zeros(m.total_seq_lens, 12);
  for (size_t i = 0; i < gathered.data.size(); ++i) gathered.data[i] = static_cast<uint8_t>(i * 7 + 1);
  const HostTensor want = ref::BatchInSeqAllGatherRerange(gathered, m, 2).value();
  HostTensor out;
  ASSERT_TRUE(fast::BatchInSeqAllGatherRerangeInto(gathered, m, 2, &out).ok());
  const uint8_t* storage = out.data.data();
  ASSERT_TRUE(fast::BatchInSeqAllGatherRerangeInto(gathered, m, 2, &out).ok());
  EXPECT_EQ(out.data.data(), storage);
  EXPECT_TRUE(out == want);
}

}  // namespace
}  // namespace kvshard::fast
