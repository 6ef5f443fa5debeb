// Fuzz target: the calibration file reader and its least-squares fits (sim/calibration.h). Oracle: no crash or
// sanitizer report; an accepted file has one fit per operation present, in CalibrationOps() order, each with
// finite non-negative terms and errors; `kvshard calibrate` keeps the bad-input contract.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>

#include "fuzz/cli_check.h"
#include "fuzz/fuzz_util.h"
#include "sim/calibration.h"

namespace kvshard::fuzz {
namespace {

bool FiniteNonNegative(double x) { return std::isfinite(x) && x >= 0; }

void Check(const std::string& text) {
  std::istringstream in(text);
  const StatusOr<sim::Calibration> cal = sim::ReadCalibration(in);
  if (cal.ok()) {
    std::set<std::string> ops;
    for (const sim::CalibrationRow& r : cal->rows) ops.insert(r.op);
    FUZZ_ASSERT(cal->fits.size() == ops.size(), cal->fits.size(), " fits for ", ops.size(), " operations");
    size_t order = 0;
    for (const sim::OpFit& f : cal->fits) {
      FUZZ_ASSERT(ops.count(f.op), "a fit of an absent op ", f.op);
      const auto& all = sim::CalibrationOps();
      while (order < all.size() && all[order] != f.op) ++order;
      FUZZ_ASSERT(order < all.size(), "fits out of CalibrationOps() order at ", f.op);
      const sim::LinearTime& t = f.fit;
      FUZZ_ASSERT(FiniteNonNegative(t.latency_us) && FiniteNonNegative(t.us_per_unit) && FiniteNonNegative(t.knee) &&
                      FiniteNonNegative(t.us_per_unit_above),
                  f.op, ": fit terms ", t.latency_us, " ", t.us_per_unit, " ", t.knee, " ", t.us_per_unit_above);
      FUZZ_ASSERT(FiniteNonNegative(f.held_out_p50) && FiniteNonNegative(f.held_out_p90) &&
                      FiniteNonNegative(f.held_out_max) && FiniteNonNegative(f.fit_max),
                  f.op, ": fit errors ", f.held_out_p50, " ", f.held_out_p90, " ", f.held_out_max, " ", f.fit_max);
      FUZZ_ASSERT(f.held_out_p50 <= f.held_out_p90 && f.held_out_p90 <= f.held_out_max, f.op, ": error quantiles");
    }
    (void)sim::Calibrated(sim::CostModel{}, *cal, "fuzz");
  }
  RunCliChecked({"calibrate", "-", "--json"}, text);
  RunCliChecked({"calibrate", "-"}, text);
}

}  // namespace
}  // namespace kvshard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvshard::fuzz::Check(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
