// Calibration files read strictly, each operation fitted by weighted least squares (Eigen), held-out error
// from a fit on every other row in size order.
#include "sim/calibration.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <sstream>

#include <Eigen/Dense>

#include "core/json.h"

namespace kvshard::sim {
namespace {

struct OpInfo {
  const char* op;
  const char* unit;
};

// Every operation a calibration may hold; the last two are recorded for reference and not used by the model.
constexpr OpInfo kOps[] = {
    {"host_gather_plan_build", "prefix page refs"},
    {"gather_rows", "bytes"},
    {"stage_chunk", "bytes"},
    {"rerange", "bytes"},
    {"compute_dense", "FLOPs"},
    {"compute_attention", "FLOPs"},
    {"owner_write", "bytes"},
    {"copy", "bytes"},
    {"gather_plan_build", "prefix page refs"},
};

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

double RelativeError(const LinearTime& f, const CalibrationRow& r) {
  return std::abs(f.At(r.x) - r.time_us) / r.time_us;
}

// Least squares on relative error: each row scaled by 1/t against target 1, solved with column-pivoting QR.
// Features per row: latency (1), then cost up to the knee (min(x, knee)), then after it (max(0, x - knee));
// knee <= 0 means one cost. Empty when a coefficient comes out negative (not a physical time).
std::optional<LinearTime> SolveFor(const std::vector<CalibrationRow>& rows, bool latency, double knee) {
  const int cols = (latency ? 1 : 0) + 1 + (knee > 0 ? 1 : 0);
  Eigen::MatrixXd a(rows.size(), cols);
  const Eigen::VectorXd b = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    const double x = rows[i].x, t = rows[i].time_us;
    int c = 0;
    if (latency) a(i, c++) = 1.0 / t;
    a(i, c++) = (knee > 0 ? std::min(x, knee) : x) / t;
    if (knee > 0) a(i, c++) = std::max(0.0, x - knee) / t;
  }
  const Eigen::VectorXd s = a.colPivHouseholderQr().solve(b);
  LinearTime f;
  int c = 0;
  if (latency) f.latency_us = s[c++];
  f.us_per_unit = s[c++];
  if (knee > 0) {
    f.knee = knee;
    f.us_per_unit_above = s[c++];
  }
  if (f.latency_us < 0 || f.us_per_unit < 0 || f.us_per_unit_above < 0) return std::nullopt;
  return f;
}

double SquaredError(const LinearTime& f, const std::vector<CalibrationRow>& rows) {
  double e = 0;
  for (const CalibrationRow& r : rows) e += std::pow((f.At(r.x) - r.time_us) / r.time_us, 2);
  return e;
}

Status Strict(const Json& obj, const std::string& where, const std::set<std::string>& keys) {
  if (!obj.is_object()) return InvalidArgument(where, ": must be an object");
  for (const auto& [k, v] : obj.items()) {
    if (!keys.count(k)) return InvalidArgument(where, QuoteInput(k, '\0'), ": unknown key");
  }
  return Status::Ok();
}

// A number > 0; with lo/hi (a row's size and time) also in [lo, hi], which keeps the fit's sums of squares of
// x / time finite (fuzzing found 1e300-sized rows and 1e-300 us times fitting to NaN).
StatusOr<double> PositiveNumber(const Json& obj, const std::string& key, const std::string& where, double lo = 0,
                                double hi = 0) {
  if (!obj.contains(key)) return InvalidArgument(where, key, ": missing");
  const Json& v = obj.at(key);
  if (!v.is_number()) return InvalidArgument(where, key, ": must be a number");
  const double x = v.get<double>();
  if (!(x > 0) || !std::isfinite(x)) return InvalidArgument(where, key, ": must be > 0, got ", v.dump());
  if (hi > 0 && (x < lo || x > hi))
    return InvalidArgument(where, key, ": must be in [", lo, ", ", hi, "], got ", v.dump());
  return x;
}

StatusOr<std::string> Text(const Json& obj, const std::string& key, const std::string& where, bool required) {
  if (!obj.contains(key)) {
    if (required) return InvalidArgument(where, key, ": missing");
    return std::string();
  }
  if (!obj.at(key).is_string()) return InvalidArgument(where, key, ": must be a string");
  return obj.at(key).get<std::string>();
}

}  // namespace

const std::vector<std::string>& CalibrationOps() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v;
    for (const OpInfo& o : kOps) v.push_back(o.op);
    return v;
  }();
  return ops;
}

std::string CalibrationUnit(const std::string& op) {
  for (const OpInfo& o : kOps) {
    if (op == o.op) return o.unit;
  }
  return "";
}

StatusOr<LinearTime> FitLinearTime(const std::vector<CalibrationRow>& rows) {
  std::set<double> xs;
  for (const CalibrationRow& r : rows) xs.insert(r.x);
  if (xs.size() < 2) return InvalidArgument("a fit needs at least two rows of different size, got ", rows.size());
  // Latency + one cost per unit; where a term comes out negative, the better of cost alone and a constant.
  std::optional<LinearTime> best = SolveFor(rows, true, 0);
  if (!best) {
    double mean_inverse = 0, mean_inverse_sq = 0;  // the constant c minimizing Σ (c / t - 1)^2
    for (const CalibrationRow& r : rows) {
      mean_inverse += 1 / r.time_us;
      mean_inverse_sq += 1 / (r.time_us * r.time_us);
    }
    best = LinearTime{mean_inverse / mean_inverse_sq, 0};
    const std::optional<LinearTime> cost_only = SolveFor(rows, false, 0);
    if (cost_only && SquaredError(*cost_only, rows) < SquaredError(*best, rows)) best = cost_only;
  }
  // A knee at one of the measured sizes, kept when it at least halves the squared error (with 6+ rows, so
  // that each piece rests on several measurements).
  if (xs.size() >= 6) {
    const std::vector<double> sizes(xs.begin(), xs.end());
    double best_error = SquaredError(*best, rows);
    const double affine_error = best_error;
    std::optional<LinearTime> knee_fit;
    const size_t first = 2, span = sizes.size() - 4, tries = std::min(span, kMaxKneeCandidates);
    for (size_t k = 0; k < tries; ++k) {
      const size_t i = first + k * span / tries;  // every size when span <= kMaxKneeCandidates
      const std::optional<LinearTime> f = SolveFor(rows, true, sizes[i]);
      if (f && SquaredError(*f, rows) < best_error) {
        best_error = SquaredError(*f, rows);
        knee_fit = f;
      }
    }
    if (knee_fit && best_error < 0.5 * affine_error) best = knee_fit;
  }
  return *best;
}

StatusOr<Calibration> ReadCalibration(std::istream& in) {
  std::stringstream buf;
  buf << in.rdbuf();
  // Syntax errors at their line and column; duplicate keys are errors.
  KVSHARD_ASSIGN_OR_RETURN(const Json j, ParseJsonStrict(buf.str(), ""));
  KVSHARD_RETURN_IF_ERROR(Strict(j, "", {"kvshard_calibration", "device", "made_by", "limits", "rows"}));
  if (!j.contains("kvshard_calibration") || j["kvshard_calibration"] != 1) {
    return InvalidArgument("kvshard_calibration: must be 1 (the format version)");
  }
  Calibration c;
  KVSHARD_ASSIGN_OR_RETURN(c.device, Text(j, "device", "", true));
  if (j.contains("made_by")) {
    if (!j["made_by"].is_array()) return InvalidArgument("made_by: must be a list of strings");
    for (size_t i = 0; i < j["made_by"].size(); ++i) {
      if (!j["made_by"][i].is_string()) return InvalidArgument("made_by[", i, "]: must be a string");
      c.made_by.push_back(j["made_by"][i].get<std::string>());
    }
  }
  if (!j.contains("limits")) return InvalidArgument("limits: missing");
  const Json& limits = j["limits"];
  KVSHARD_RETURN_IF_ERROR(
      Strict(limits, "limits.", {"nccl_busbw_bytes_per_s", "collective_latency_us", "nccl_source"}));
  KVSHARD_ASSIGN_OR_RETURN(
      double busbw, PositiveNumber(limits, "nccl_busbw_bytes_per_s", "limits.", kMinBusBytesPerS, kMaxBusBytesPerS));
  c.nccl_bus_bytes_per_us = busbw / 1e6;
  KVSHARD_ASSIGN_OR_RETURN(c.collective_latency_us, PositiveNumber(limits, "collective_latency_us", "limits.",
                                                                   kMinCollectiveLatencyUs, kMaxCollectiveLatencyUs));
  KVSHARD_ASSIGN_OR_RETURN(c.nccl_source, Text(limits, "nccl_source", "limits.", true));
  if (!j.contains("rows") || !j["rows"].is_array()) return InvalidArgument("rows: missing or not a list");
  if (j["rows"].empty()) {  // a calibration of nothing would still label the cost model "calibrated"
    return InvalidArgument("rows: empty (a calibration holds measured rows; --calibration none turns it off)");
  }
  for (size_t i = 0; i < j["rows"].size(); ++i) {
    const Json& row = j["rows"][i];
    const std::string where = StrCat("rows[", i, "].");
    KVSHARD_RETURN_IF_ERROR(Strict(row, where, {"op", "x", "time_us", "note"}));
    CalibrationRow r;
    KVSHARD_ASSIGN_OR_RETURN(r.op, Text(row, "op", where, true));
    if (CalibrationUnit(r.op).empty()) return InvalidArgument(where, "op: unknown operation ", QuoteInput(r.op, '\''));
    KVSHARD_ASSIGN_OR_RETURN(r.x, PositiveNumber(row, "x", where, kMinRowSize, kMaxRowSize));
    KVSHARD_ASSIGN_OR_RETURN(r.time_us, PositiveNumber(row, "time_us", where, kMinRowTimeUs, kMaxRowTimeUs));
    KVSHARD_ASSIGN_OR_RETURN(r.note, Text(row, "note", where, false));
    c.rows.push_back(std::move(r));
  }
  for (const std::string& op : CalibrationOps()) {
    std::vector<CalibrationRow> rows;
    for (const CalibrationRow& r : c.rows) {
      if (r.op == op) rows.push_back(r);
    }
    if (rows.empty()) continue;
    std::stable_sort(rows.begin(), rows.end(),
                     [](const CalibrationRow& a, const CalibrationRow& b) { return a.x < b.x; });
    OpFit f;
    f.op = op;
    f.rows = static_cast<int64_t>(rows.size());
    StatusOr<LinearTime> all = FitLinearTime(rows);
    if (!all.ok()) return InvalidArgument("rows: ", op, ": ", all.status().message());
    f.fit = *all;
    for (const CalibrationRow& r : rows) f.fit_max = std::max(f.fit_max, RelativeError(f.fit, r));
    std::vector<CalibrationRow> train, test;
    for (size_t i = 0; i < rows.size(); ++i) (i % 2 == 0 ? train : test).push_back(rows[i]);
    if (StatusOr<LinearTime> part = FitLinearTime(train); part.ok() && !test.empty()) {
      std::vector<double> err;
      for (const CalibrationRow& r : test) err.push_back(RelativeError(*part, r));
      f.held_out = static_cast<int64_t>(test.size());
      f.held_out_p50 = Quantile(err, 0.5);
      f.held_out_p90 = Quantile(err, 0.9);
      f.held_out_max = *std::max_element(err.begin(), err.end());
    }
    c.fits.push_back(f);
  }
  return c;
}

CostModel Calibrated(const CostModel& base, const Calibration& c, const std::string& source) {
  CostModel m = base;
  m.source = source;
  m.nvlink_bytes_per_us = c.nccl_bus_bytes_per_us;
  m.collective_latency_us = c.collective_latency_us;
  for (const OpFit& f : c.fits) {
    if (f.op == "host_gather_plan_build") m.plan_fit = f.fit;
    if (f.op == "gather_rows") m.pack_fit = f.fit;
    if (f.op == "stage_chunk") m.stage_fit = f.fit;
    if (f.op == "rerange") m.rerange_fit = f.fit;
    if (f.op == "compute_dense") m.dense_fit = f.fit;
    if (f.op == "compute_attention") m.attention_fit = f.fit;
  }
  return m;
}

}  // namespace kvshard::sim
