// GPU outputs run to run (docs/RELIABILITY.md, "Determinism"): the same inputs through the same GPU ops twice
// give the same bytes — the fused batch rerange, `gather-plan --backend gpu`, and the sharded pool's pipeline on
// the emulated group (every plan it builds and every row it reads back). Skips without a GPU.
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "cli/commands.h"
#include "replay/gpu_pool_path.h"
#include "replay/trace_gen.h"
#include "core/pool_json.h"
#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_split.h"
#include "gpu/cp_plan_ops.h"
#include "props/cp_generators.h"
#include "props/gpu_test_env.h"
#include "props/pool_generators.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "props/trace_testing.h"

namespace kvshard::props {
namespace {

// A GPU pool path that appends every plan it builds to `plans` and every row it reads (and every error) to `log`:
// under --backend gpu, Plan runs on the checking thread and the other calls on the device thread.
class RecordingPath : public replay::PoolDataPath {
 public:
  RecordingPath(std::unique_ptr<replay::PoolDataPath> inner, std::string* plans, std::string* log)
      : inner_(std::move(inner)), plans_(plans), log_(log) {}
  std::string Name() const override { return inner_->Name(); }
  StatusOr<GatherPlan> Plan(const ExtendBatch& batch) override {
    StatusOr<GatherPlan> plan = inner_->Plan(batch);
    *plans_ += (plan.ok() ? GatherPlanToJson(*plan).dump() : plan.status().ToString()) + "\n";
    return plan;
  }
  Status Install(const ExtendBatch& batch, const GatherPlan& plan, const std::vector<int64_t>& out_cache_loc) override {
    const Status s = inner_->Install(batch, plan, out_cache_loc);
    if (!s.ok()) *log_ += s.ToString() + "\n";
    return s;
  }
  Status CheckWrite(bool in_extend, const std::vector<int64_t>& locs,
                    const std::vector<int64_t>& out_cache_loc) const override {
    return inner_->CheckWrite(in_extend, locs, out_cache_loc);
  }
  Status Write(int64_t layer, const std::vector<int64_t>& locs, const ref::BufferRows& rows) override {
    return inner_->Write(layer, locs, rows);
  }
  Status StartRead(int64_t layer, const std::vector<int64_t>& locs) override {
    const Status s = inner_->StartRead(layer, locs);
    if (!s.ok()) *log_ += s.ToString() + "\n";
    return s;
  }
  StatusOr<std::vector<ref::BufferRows>> FinishRead() override {
    StatusOr<std::vector<ref::BufferRows>> rows = inner_->FinishRead();
    if (!rows.ok()) {
      *log_ += rows.status().ToString() + "\n";
      return rows;
    }
    for (const ref::BufferRows& rank : *rows) {
      for (const std::vector<uint8_t>& buffer : rank) {
        log_->append(reinterpret_cast<const char*>(buffer.data()), buffer.size());
      }
    }
    return rows;
  }
  Status End() override { return inner_->End(); }

 private:
  std::unique_ptr<replay::PoolDataPath> inner_;
  std::string* plans_;
  std::string* log_;
};

TEST(GpuDeterminism, FusedRerangeBytesRepeat) {
  KVSHARD_REQUIRE_GPUS(1);
  RecordPropertyCases(CheckProperty(
      CurrentTestId(),
      [] {
        const CPBatchCase c = *GenCPBatchCase();
        const HostTensor x = Payload(c.extend_lens, c.row_bytes);
        // As props/gpu_cp_ops_test.cc: a batch all-gathers its valid rows, one request its compute rows.
        const bool scalar = c.extend_lens.size() == 1;
        std::vector<HostTensor> locals;
        for (int64_t r = 0; r < c.cp_size; ++r) {
          locals.push_back(RC_VALUE(ref::SplitTensorByCPBatchPlan(x, RankPlan(c, r), ref::SplitMode::kData,
                                                                  scalar ? SplitKind::kCompute : SplitKind::kValid)));
        }
        const CPSharedKVBatchPlan plan0 = RankPlan(c, 0);
        const int64_t m = RC_VALUE(ref::BuildBatchMetadataFromPlan(plan0)).max_rank_token();
        const HostTensor gathered = RC_VALUE(ref::AllGatherPadded(locals, m * c.cp_size));
        const Int64Table& lists =
            scalar && plan0.compute_padding_enabled ? plan0.request_compute_split_lists : plan0.request_split_lists;
        const std::vector<uint8_t> a = RC_VALUE(gpu::RunBatchRerange(gathered.data, c.row_bytes, lists, c.cp_size, m));
        const std::vector<uint8_t> b = RC_VALUE(gpu::RunBatchRerange(gathered.data, c.row_bytes, lists, c.cp_size, m));
        RC_ASSERT(a == b);
      },
      rc::detail::configuration().testParams));
}

TEST(GpuDeterminism, GatherPlanOnTheGpuRepeats) {
  KVSHARD_REQUIRE_GPUS(1);
  RecordPropertyCases(CheckProperty(
      CurrentTestId(),
      [] {
        const std::string batch = ExtendBatchToJson(DrawValidBatch()).dump();
        std::string first;
        for (int i = 0; i < 2; ++i) {
          std::istringstream in(batch);
          std::ostringstream out, err;
          const int code = cli::Dispatch({"gather-plan", "--batch", "-", "--json", "--backend", "gpu"}, in, out, err);
          if (code != 0) RC_FAIL("gather-plan --backend gpu: exit " + std::to_string(code) + ": " + err.str());
          if (i == 0) first = out.str();
          RC_ASSERT(out.str() == first);
        }
      },
      rc::detail::configuration().testParams));
}

TEST(GpuDeterminism, PoolPipelineOnTheEmulatedGroupRepeats) {
  KVSHARD_REQUIRE_GPUS(1);
  RecordPropertyCases(CheckProperty(
      CurrentTestId(),
      [] {
        replay::TraceGenOptions o = ArbitraryTraceGenOptions();
        o.records = *rc::gen::inRange<int64_t>(1, 100);
        o.num_layers = *rc::gen::inRange<int64_t>(1, 4);
        std::ostringstream trace;
        RC_ASSERT_OK(replay::GenerateTrace(o, trace));
        std::string plans[2], logs[2];
        for (int run = 0; run < 2; ++run) {
          replay::ReplayOptions options;
          options.backend = replay::Backend::kGpu;
          options.make_device =
              [&plans, &logs, run](const replay::PoolGeometry& g) -> StatusOr<std::unique_ptr<replay::PoolDataPath>> {
            KVSHARD_ASSIGN_OR_RETURN(std::unique_ptr<replay::PoolDataPath> path,
                                     replay::CreateGpuPoolPath(g, /*gpus=*/1));
            return std::unique_ptr<replay::PoolDataPath>(new RecordingPath(std::move(path), &plans[run], &logs[run]));
          };
          ReplayCounts counts;
          RC_ASSERT_OK(ReplayTraceText(trace.str(), options, &counts));
        }
        RC_CLASSIFY(!plans[0].empty() && !logs[0].empty(), "plans and rows recorded");
        RC_ASSERT(plans[0] == plans[1]);
        RC_ASSERT(logs[0] == logs[1]);
      },
      rc::detail::configuration().testParams));
}

}  // namespace
}  // namespace kvshard::props
