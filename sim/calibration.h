// A cost-model calibration: measured operation times from `kvshard bench --json` and the compute benchmark on a
// GPU machine (testdata/calibration/), each operation fitted as time = latency + size x cost by least squares
// on relative error (Eigen), with the fit's error on held-out rows; the fits then replace the physical rates.
#ifndef KVSHARD_SIM_CALIBRATION_H_
#define KVSHARD_SIM_CALIBRATION_H_

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "core/status.h"
#include "sim/cost_model.h"

namespace kvshard::sim {

// One measurement: an operation, its size in the operation's unit (CalibrationUnit), its time.
struct CalibrationRow {
  std::string op;
  double x = 0;
  double time_us = 0;
  std::string note;
};

// An operation's fit and how well it predicts rows it was not fitted on.
struct OpFit {
  std::string op;
  LinearTime fit;  // fitted on every row of the op (the model's rates)
  int64_t rows = 0;
  int64_t held_out = 0;  // rows at odd positions in size order, predicted by a fit on the even ones
  double held_out_p50 = 0, held_out_p90 = 0, held_out_max = 0;  // |predicted - measured| / measured
  double fit_max = 0;                                           // the same error of the all-row fit over all rows
};

// A calibration file's contents and its fits.
struct Calibration {
  std::string device;
  std::vector<std::string> made_by;  // the commands that measured the rows
  double nccl_bus_bytes_per_us = 0;  // all-gather bus bandwidth (an input: measured, documented source)
  double collective_latency_us = 0;
  std::string nccl_source;
  std::vector<CalibrationRow> rows;
  std::vector<OpFit> fits;  // one per operation present, in CalibrationOps() order
};

// Accepted row sizes (in the op's unit) and times: 10^-6 .. 10^18 units, 1 ns .. 10^12 us (11.6 days).
inline constexpr double kMinRowSize = 1e-6, kMaxRowSize = 1e18;
inline constexpr double kMinRowTimeUs = 1e-3, kMaxRowTimeUs = 1e12;
// Accepted limits: a collective bus bandwidth of 1 kB/s .. 1 PB/s and a collective latency of 1 ns .. 10^9 us, so
// every time the cost model derives stays finite and positive.
inline constexpr double kMinBusBytesPerS = 1e3, kMaxBusBytesPerS = 1e15;
inline constexpr double kMinCollectiveLatencyUs = 1e-3, kMaxCollectiveLatencyUs = 1e9;
// Knee positions a fit tries: every measured size when there are at most this many, else this many spread evenly
// over them, so a fit costs time linear in its rows (20,000 rows of one op took 68 s when every size was tried).
inline constexpr size_t kMaxKneeCandidates = 64;

// The operations a calibration may hold, in a fixed order.
const std::vector<std::string>& CalibrationOps();
// The unit of an operation's size ("bytes", "prefix page refs", "FLOPs").
std::string CalibrationUnit(const std::string& op);

// Fits time = latency + x * cost to rows minimizing Σ ((predicted - measured) / measured)^2 (Eigen QR), every
// term kept >= 0; with 6+ distinct sizes, a knee (a second cost per unit past one of the measured sizes) is
// taken when it at least halves that error. At least two rows of distinct x are needed.
StatusOr<LinearTime> FitLinearTime(const std::vector<CalibrationRow>& rows);

// Reads a calibration file (docs/simulate.md: `kvshard_calibration`: 1); strict: unknown keys, unknown ops,
// non-positive sizes or times are errors naming the field. Fits every operation present.
StatusOr<Calibration> ReadCalibration(std::istream& in);

// The cost model with the calibration's fits in place of the physical rates (ops absent keep theirs).
CostModel Calibrated(const CostModel& base, const Calibration& calibration, const std::string& source);

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_CALIBRATION_H_
