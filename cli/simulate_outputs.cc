// The simulate output flags: directories created up front (an existing non-directory is exit 2 naming the
// flag), files written after the run whatever its verdict, every write failure naming the flag and the file.
#include "cli/simulate_outputs.h"

#include <filesystem>
#include <functional>
#include <iostream>
#include <ostream>
#include <string>
#include <system_error>
#include <utility>

#include "cli/memory_limit.h"
#include "sim/csv_tables.h"
#include "sim/plots.h"
#include "sim/svg_chart.h"
#include "sim/timeline.h"

namespace kvshard::cli {
namespace {

namespace fs = std::filesystem;

// `dir` as a directory: created (with its parents) when missing.
Status PrepareDir(const std::string& flag, const std::string& dir) {
  if (dir.empty()) return InvalidArgument("--", flag, ": needs a directory name");
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) return InvalidArgument("--", flag, ": ", dir, ": exists and is not a directory");
    return Status::Ok();
  }
  if (!fs::create_directories(dir, ec) && ec) {
    return InvalidArgument("--", flag, ": ", dir, ": cannot create directory: ", ec.message());
  }
  return Status::Ok();
}

// Writes `dir`/`name` with `body`, whole or not at all; errors name the flag and the file.
Status WriteFile(const std::string& flag, const std::string& dir, const std::string& name,
                 const std::function<Status(std::ostream&)>& body) {
  const std::string path = (fs::path(dir) / name).string();
  KVSHARD_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> out, OutputFile::Open(flag, path, std::cout));
  Status s = body(out->stream());
  if (!s.ok()) return InvalidArgument("--", flag, ": ", path, ": write failed: ", s.message());
  return out->Commit();
}

}  // namespace

void DeclareSimulateOutputFlags(po::options_description& flags) {
  flags.add_options()("timeline", po::value<std::string>()->value_name("FILE"),
                      "write the batches as a Chrome/Perfetto trace (open in ui.perfetto.dev or chrome://tracing)")(
      "csv", po::value<std::string>()->value_name("DIR|FILE"),
      "write requests.csv, batches.csv and rank_pages.csv into DIR (created if missing); with --sweep: the rows "
      "as CSV to FILE")("plots", po::value<std::string>()->value_name("DIR"),
                        "write SVG plots (pages in use, prefix hit rate, gathered bytes, CP padding, TTFT CDF, "
                        "requests waiting; with --sweep: TTFT and utilization across the sweep) into DIR");
}

const std::vector<std::string>& CsvTableFiles() {
  static const auto* files = new std::vector<std::string>{"requests.csv", "batches.csv", "rank_pages.csv"};
  return *files;
}

StatusOr<std::string> CheckSimulatePaths(const Flags& flags) {
  std::vector<FlagPath> inputs, outputs;
  inputs.push_back({"workload", flags.String("workload")});
  if (const std::string c = flags.String("calibration"); c != kBuiltinCalibrationName && c != kNoCalibrationName) {
    inputs.push_back({"calibration", c});
  }
  for (const char* flag : {"timeline", "emit-trace"}) {
    if (flags.Has(flag)) outputs.push_back({flag, flags.String(flag)});
  }
  if (flags.Has("csv")) {
    if (flags.Has("sweep")) {
      outputs.push_back({"csv", flags.String("csv")});
    } else {
      for (const std::string& f : CsvTableFiles())
        outputs.push_back({"csv", (fs::path(flags.String("csv")) / f).string()});
    }
  }
  KVSHARD_RETURN_IF_ERROR(CheckOutputPaths(inputs, outputs));
  for (const FlagPath& o : outputs) {
    if (o.path == "-") return o.flag;
  }
  return std::string();
}

StatusOr<SimulateOutputs> SimulateOutputs::Prepare(const Flags& flags, std::ostream& standard_output) {
  SimulateOutputs o;
  o.standard_output_ = &standard_output;
  if (flags.Has("csv")) {
    o.csv_dir_ = flags.String("csv");
    KVSHARD_RETURN_IF_ERROR(PrepareDir("csv", o.csv_dir_));
  }
  if (flags.Has("plots")) {
    o.plots_dir_ = flags.String("plots");
    KVSHARD_RETURN_IF_ERROR(PrepareDir("plots", o.plots_dir_));
  }
  if (flags.Has("timeline")) {
    const std::string path = flags.String("timeline");
    std::error_code ec;
    if (path.empty() || fs::is_directory(path, ec)) {
      return InvalidArgument("--timeline: '", path, "': needs a file name, not a directory");
    }
    KVSHARD_ASSIGN_OR_RETURN(o.timeline_, OutputFile::Open("timeline", path, standard_output));
  }
  return o;
}

Status SimulateOutputs::Write(const sim::SimRecord& record) {
  if (timeline_) {
    Status s = sim::WriteTimeline(record, timeline_->stream());
    if (!s.ok()) return InvalidArgument("--timeline: write failed: ", s.message());
    KVSHARD_RETURN_IF_ERROR(timeline_->Commit());
  }
  if (!csv_dir_.empty()) {
    KVSHARD_RETURN_IF_ERROR(WriteFile("csv", csv_dir_, "requests.csv",
                                      [&](std::ostream& out) { return sim::WriteRequestsCsv(record, out); }));
    KVSHARD_RETURN_IF_ERROR(WriteFile("csv", csv_dir_, "batches.csv",
                                      [&](std::ostream& out) { return sim::WriteBatchesCsv(record, out); }));
    KVSHARD_RETURN_IF_ERROR(WriteFile("csv", csv_dir_, "rank_pages.csv",
                                      [&](std::ostream& out) { return sim::WriteRankPagesCsv(record, out); }));
  }
  if (!plots_dir_.empty()) KVSHARD_RETURN_IF_ERROR(WritePlots(plots_dir_, sim::BuildPlots(record)));
  return Status::Ok();
}

Status WritePlots(const std::string& dir, const std::vector<sim::Plot>& plots) {
  KVSHARD_RETURN_IF_ERROR(PrepareDir("plots", dir));
  for (const sim::Plot& plot : plots) {
    KVSHARD_RETURN_IF_ERROR(WriteFile("plots", dir, plot.file, [&](std::ostream& out) {
      out << sim::RenderSvg(plot.chart);
      return Status::Ok();
    }));
  }
  return Status::Ok();
}

}  // namespace kvshard::cli
