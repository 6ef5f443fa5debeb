// kvshard calibrate: reads a cost-model calibration (measured operation times, docs/simulate.md), fits each
// operation and prints the fits with their error on held-out rows, the figures `simulate --calibration` uses.
#include <cstdio>
#include <ostream>
#include <string>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/memory_limit.h"
#include "sim/calibration.h"

namespace kvshard::cli {
namespace {

void DeclareFlags(po::options_description& flags) {
  flags.add_options()("calibration", File(),
                      "the calibration file (also given without the flag); - reads standard input; h200 the built-in "
                      "one (testdata/calibration/h200.json, simulate's default)")(
      "json", po::bool_switch(), "print one JSON object instead of the table");
  DeclareMaxMemoryFlag(flags);
}

// The phase of the cost model an operation's fit times ("-" for rows kept for reference).
const char* Phase(const std::string& op) {
  if (op == "host_gather_plan_build") return "plan";
  if (op == "gather_rows") return "pack";
  if (op == "stage_chunk") return "stage";
  if (op == "rerange") return "rerange";
  if (op == "compute_dense") return "compute (GEMM)";
  if (op == "compute_attention") return "compute (attention)";
  return "-";
}

Status Run(const Flags& flags, std::ostream& out) {
  KVSHARD_RETURN_IF_ERROR(flags.Require({"calibration"}));
  sim::Calibration c;
  KVSHARD_ASSIGN_OR_RETURN(c, ReadCalibrationFlag(flags));
  if (flags.Bool("json")) {
    Json j;
    j["device"] = c.device;
    j["made_by"] = c.made_by;
    j["nccl_busbw_bytes_per_s"] = c.nccl_bus_bytes_per_us * 1e6;
    j["collective_latency_us"] = c.collective_latency_us;
    j["nccl_source"] = c.nccl_source;
    j["fits"] = Json::array();
    for (const sim::OpFit& f : c.fits) {
      j["fits"].push_back({{"op", f.op},
                           {"unit", sim::CalibrationUnit(f.op)},
                           {"phase", Phase(f.op)},
                           {"rows", f.rows},
                           {"latency_us", f.fit.latency_us},
                           {"us_per_unit", f.fit.us_per_unit},
                           {"knee", f.fit.knee},
                           {"us_per_unit_above", f.fit.us_per_unit_above},
                           {"held_out", f.held_out},
                           {"held_out_p50", f.held_out_p50},
                           {"held_out_p90", f.held_out_p90},
                           {"held_out_max", f.held_out_max},
                           {"fit_max", f.fit_max}});
    }
    PrintJson(j, out);
    return Status::Ok();
  }
  out << "# device: " << c.device << "\n";
  for (const std::string& m : c.made_by) out << "# made by: " << m << "\n";
  out << "# all-gather: " << c.nccl_bus_bytes_per_us / 1e3 << " GB/s bus bandwidth, " << c.collective_latency_us
      << " us latency (" << c.nccl_source << ")\n";
  char line[512];
  std::snprintf(line, sizeof(line), "# %-22s %-20s %5s %12s %14s %26s %9s %9s %9s %9s\n", "op", "phase", "rows",
                "latency(us)", "rate", "past knee", "held-out", "p50", "p90", "max");
  out << line;
  for (const sim::OpFit& f : c.fits) {
    const std::string unit = sim::CalibrationUnit(f.op);
    auto rate = [&](double us_per_unit) {
      const double per_s = us_per_unit > 0 ? 1e6 / us_per_unit : 0;
      char text[64];
      if (unit == "bytes") {
        std::snprintf(text, sizeof(text), "%.1f GB/s", per_s / 1e9);
      } else if (unit == "FLOPs") {
        std::snprintf(text, sizeof(text), "%.1f TFLOP/s", per_s / 1e12);
      } else {
        std::snprintf(text, sizeof(text), "%.3g /s", per_s);
      }
      return std::string(text);
    };
    char knee[64] = "-";
    if (f.fit.knee > 0)
      std::snprintf(knee, sizeof(knee), "%s past %.3g", rate(f.fit.us_per_unit_above).c_str(), f.fit.knee);
    std::snprintf(line, sizeof(line), "  %-22s %-20s %5lld %12.2f %14s %26s %9lld %8.1f%% %8.1f%% %8.1f%%\n",
                  f.op.c_str(), Phase(f.op), static_cast<long long>(f.rows), f.fit.latency_us,
                  rate(f.fit.us_per_unit).c_str(), knee, static_cast<long long>(f.held_out), 100 * f.held_out_p50,
                  100 * f.held_out_p90, 100 * f.held_out_max);
    out << line;
  }
  out << "# time = latency + size / rate, fitted by least squares on relative error; held-out: every other row in "
         "size order, predicted by a fit on the others (|predicted - measured| / measured)\n";
  return Status::Ok();
}

}  // namespace

Command CalibrateCommand() {
  Command c{"calibrate", "fit the simulator's cost model to measured operation times and show the fit's error",
            "FILE|- [--json] [--max-memory BYTES]", DeclareFlags, Run};
  c.positional = "calibration";
  return c;
}

}  // namespace kvshard::cli
