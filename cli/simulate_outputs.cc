// The simulate output flags: directories created up front (an existing non-directory is exit 2 naming the
// flag), files written after the run whatever its verdict, every write failure naming the flag and the file.
#include "cli/simulate_outputs.h"

#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <system_error>
#include <utility>

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

// Writes `dir`/`name` with `body`; errors name the flag and the file.
Status WriteFile(const std::string& flag, const std::string& dir, const std::string& name,
                 const std::function<Status(std::ostream&)>& body) {
  const std::string path = (fs::path(dir) / name).string();
  std::ofstream out(path);
  if (!out) return InvalidArgument("--", flag, ": ", path, ": cannot open for writing");
  Status s = body(out);
  out.close();
  if (!s.ok() || !out) return InvalidArgument("--", flag, ": ", path, ": write failed");
  return Status::Ok();
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

StatusOr<SimulateOutputs> SimulateOutputs::Prepare(const Flags& flags) {
  SimulateOutputs o;
  if (flags.Has("csv")) {
    o.csv_dir_ = flags.String("csv");
    KVSHARD_RETURN_IF_ERROR(PrepareDir("csv", o.csv_dir_));
  }
  if (flags.Has("plots")) {
    o.plots_dir_ = flags.String("plots");
    KVSHARD_RETURN_IF_ERROR(PrepareDir("plots", o.plots_dir_));
  }
  if (flags.Has("timeline")) {
    o.timeline_path_ = flags.String("timeline");
    std::error_code ec;
    if (o.timeline_path_.empty() || fs::is_directory(o.timeline_path_, ec)) {
      return InvalidArgument("--timeline: '", o.timeline_path_, "': needs a file name, not a directory");
    }
    o.timeline_ = std::make_unique<std::ofstream>(o.timeline_path_);
    if (!*o.timeline_) return InvalidArgument("--timeline: ", o.timeline_path_, ": cannot open for writing");
  }
  return o;
}

Status SimulateOutputs::Write(const sim::SimRecord& record) {
  if (timeline_) {
    Status s = sim::WriteTimeline(record, *timeline_);
    timeline_->close();
    if (!s.ok() || !*timeline_) return InvalidArgument("--timeline: ", timeline_path_, ": write failed");
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
