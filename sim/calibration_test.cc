// Calibration: the least-squares fit recovers exact affine data (a property), the reader is strict, the
// bundled H200 calibration reads and fits, and a calibrated cost model uses the fits.
#include "sim/calibration.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace kvshard::sim {
namespace {

StatusOr<Calibration> Read(const std::string& text) {
  std::istringstream in(text);
  return ReadCalibration(in);
}

const char kHeader[] =
    R"({"kvshard_calibration": 1, "device": "test", "limits": {"nccl_busbw_bytes_per_s": 2e11,
       "collective_latency_us": 10, "nccl_source": "test"}, "rows": )";

RC_GTEST_PROP(CalibrationProps, FitRecoversExactAffineTimes, ()) {
  const double latency = *rc::gen::inRange(0, 1000) / 10.0;  // 0 .. 100 us, 0 included
  const double slope = *rc::gen::inRange(1, 100000) * 1e-7;  // us per unit
  const auto xs = *rc::gen::unique<std::vector<int>>(rc::gen::inRange(1, 1 << 30));
  RC_PRE(xs.size() >= 2);
  std::vector<CalibrationRow> rows;
  for (int x : xs) rows.push_back({"copy", static_cast<double>(x), latency + slope * x, ""});
  const StatusOr<LinearTime> fit = FitLinearTime(rows);
  RC_ASSERT(fit.ok());
  for (const CalibrationRow& r : rows) {
    RC_ASSERT(std::abs(fit->At(r.x) - r.time_us) <= 1e-6 * r.time_us);
  }
}

TEST(Calibration, NegativeTermsAreDroppedAndRefitted) {
  // Times falling with size would need a negative slope: the fit keeps latency only (the mean-relative fit).
  const StatusOr<LinearTime> fit = FitLinearTime({{"copy", 1, 10, ""}, {"copy", 2, 9, ""}, {"copy", 3, 8, ""}});
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_EQ(fit->us_per_unit, 0);
  EXPECT_GT(fit->latency_us, 8);
  EXPECT_LT(fit->latency_us, 10);
  EXPECT_FALSE(FitLinearTime({{"copy", 5, 1, ""}, {"copy", 5, 2, ""}}).ok());  // one distinct size
}

// With more measured sizes than kMaxKneeCandidates a fit tries that many knees, spread over the sizes, and still
// finds a knee the data has (the cost of a fit stays linear in its rows).
TEST(Calibration, KneeFoundAmongManySizes) {
  std::vector<CalibrationRow> rows;
  for (int x = 1; x <= 2000; ++x)
    rows.push_back({"copy", static_cast<double>(x), 5 + (x <= 1000 ? x : 1000 + 4.0 * (x - 1000)), ""});
  const StatusOr<LinearTime> fit = FitLinearTime(rows);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_GT(fit->knee, 900);
  EXPECT_LT(fit->knee, 1100);
  EXPECT_GT(fit->us_per_unit_above, 3 * fit->us_per_unit);
}

TEST(Calibration, ReaderIsStrict) {
  const std::string row = R"({"op": "copy", "x": 1024, "time_us": 3})";
  const std::string ok = std::string(kHeader) + "[" + row + ", " + R"({"op": "copy", "x": 4096, "time_us": 5}])" + "}";
  ASSERT_TRUE(Read(ok).ok()) << Read(ok).status().message();
  const std::pair<std::string, std::string> bad[] = {
      {std::string(kHeader) + "[" + row + "], \"extra\": 1}", "extra: unknown key"},
      {std::string(kHeader) + R"([{"op": "warp", "x": 1, "time_us": 1}]})", "rows[0].op: unknown operation 'warp'"},
      {std::string(kHeader) + R"([{"op": "copy", "x": -1, "time_us": 1}]})", "rows[0].x: must be > 0"},
      {std::string(kHeader) + R"([{"op": "copy", "x": 1, "time_us": 1, "dev": 0}]})", "rows[0].dev: unknown key"},
      {std::string(kHeader) + "[" + row + "]}", "rows: copy: a fit needs at least two rows"},
      {R"({"kvshard_calibration": 2})", "kvshard_calibration: must be 1"},
      // Limits that made the cost model's times inf (a bandwidth of 1e-300: inf, JSON null, negative timestamps).
      {R"({"kvshard_calibration": 1, "device": "d", "limits": {"nccl_busbw_bytes_per_s": 1e-300,
          "collective_latency_us": 10, "nccl_source": "t"}, "rows": []})",
       "limits.nccl_busbw_bytes_per_s: must be in [1000, 1e+15], got 1e-300"},
      {R"({"kvshard_calibration": 1, "device": "d", "limits": {"nccl_busbw_bytes_per_s": 2e11,
          "collective_latency_us": 1e300, "nccl_source": "t"}, "rows": []})",
       "limits.collective_latency_us: must be in [0.001, 1e+09], got 1e+300"},
      // A calibration of nothing was labelled "calibrated".
      {std::string(kHeader) + "[]}",
       "rows: empty (a calibration holds measured rows; --calibration none turns it off)"},
      {R"({"kvshard_calibration": 1, "device": "d", "rows": []})", "limits: missing"},
      {"{", "not valid JSON"},
      {std::string(kHeader) + R"([{"op": "copy", "op": "copy", "x": 1, "time_us": 1}]})", "rows[0].op: duplicate key"},
      // Found by //fuzz:calibration (testdata/fuzz/calibration/seed_huge_sizes, seed_tiny_times): fitted to NaN.
      {std::string(kHeader) +
           R"([{"op": "copy", "x": 1e300, "time_us": 1}, {"op": "copy", "x": 2e300, "time_us": 2}]})",
       "rows[0].x: must be in [1e-06, 1e+18], got 1e+300"},
      {std::string(kHeader) + R"([{"op": "copy", "x": 1, "time_us": 1e-300}, {"op": "copy", "x": 2, "time_us": 1}]})",
       "rows[0].time_us: must be in [0.001, 1e+12], got 1e-300"},
  };
  for (const auto& [text, want] : bad) {
    const StatusOr<Calibration> c = Read(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.status().message().find(want), std::string::npos) << c.status().message() << " vs " << want;
  }
}

TEST(Calibration, CalibratedModelUsesTheFits) {
  const std::string text = std::string(kHeader) +
                           R"([{"op": "stage_chunk", "x": 1000, "time_us": 3}, {"op": "stage_chunk", "x": 3000,
                                "time_us": 5}, {"op": "compute_dense", "x": 1e9, "time_us": 10},
                               {"op": "compute_dense", "x": 2e9, "time_us": 15}]})";
  const StatusOr<Calibration> c = Read(text);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->fits.size(), 2u);
  CostModel physical;
  physical.layers = 2;
  const CostModel m = Calibrated(physical, *c, "test");
  ASSERT_TRUE(m.stage_fit && m.dense_fit);
  EXPECT_NEAR(m.stage_fit->latency_us, 2, 1e-9);
  EXPECT_NEAR(m.stage_fit->us_per_unit, 1e-3, 1e-12);
  BatchWork w;
  w.staged_bytes_layer = 2000;
  w.compute_tokens = 8;
  const BatchTime t = m.Predict(w, /*shard_size=*/1, /*cp_size=*/1);
  EXPECT_NEAR(t.stage_us, 2 * 4.0, 1e-9);  // 2 layers x (2 + 2000 x 0.001)
  const double flops = 8 * physical.flops_per_token_layer;
  EXPECT_NEAR(t.compute_us, 2 * (5 + 5e-9 * flops), 1e-6);
  EXPECT_EQ(t.allgather_us, 0);  // N = 1: nothing to gather
  EXPECT_EQ(m.nvlink_bytes_per_us, 2e5);
}

TEST(Calibration, BundledH200CalibrationReadsAndFits) {
  std::ifstream in("testdata/calibration/h200.json");
  ASSERT_TRUE(in) << "testdata/calibration/h200.json missing";
  const StatusOr<Calibration> c = ReadCalibration(in);
  ASSERT_TRUE(c.ok()) << c.status().message();
  for (const char* op :
       {"host_gather_plan_build", "gather_rows", "stage_chunk", "rerange", "compute_dense", "compute_attention"}) {
    bool found = false;
    for (const OpFit& f : c->fits) {
      if (f.op != op) continue;
      found = true;
      EXPECT_GE(f.rows, 4) << op;
      EXPECT_GT(f.held_out, 0) << op;
      std::cout << op << ": " << f.rows << " rows, held-out p50 " << f.held_out_p50 << " p90 " << f.held_out_p90
                << "\n";
    }
    EXPECT_TRUE(found) << op << " has no rows";
  }
}

}  // namespace
}  // namespace kvshard::sim
