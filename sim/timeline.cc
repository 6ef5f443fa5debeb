// The trace-event writer: streamed by hand (the Mooncake trace gives ~50k events per rank), with every
// boundary rounded once to nanoseconds so a track's events never overlap after rounding.
#include "sim/timeline.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>

namespace kvshard::sim {
namespace {

// Microseconds as integer nanoseconds.
int64_t Ns(double us) { return std::llround(us * 1000.0); }

// Integer nanoseconds written as microseconds with 3 decimals.
std::string Us(int64_t ns) {
  char buf[32];
  const int64_t whole = ns / 1000, frac = ns % 1000;
  std::snprintf(buf, sizeof(buf), "%" PRId64 ".%03" PRId64, whole, frac < 0 ? -frac : frac);
  return buf;
}

class EventWriter {
 public:
  explicit EventWriter(std::ostream& out) : out_(out) {}

  void Raw(const std::string& event) {
    out_ << (first_ ? "\n" : ",\n") << event;
    first_ = false;
  }
  void Meta(int64_t pid, int tid, const char* name, const std::string& args) {
    Raw("{\"ph\":\"M\",\"pid\":" + std::to_string(pid) + (tid >= 0 ? ",\"tid\":" + std::to_string(tid) : "") +
        ",\"name\":\"" + name + "\",\"args\":{" + args + "}}");
  }
  // A complete event [b0, b1) in nanoseconds; skipped when empty.
  void Slice(int64_t pid, int tid, const char* name, int64_t b0, int64_t b1, const std::string& args = "") {
    if (b1 <= b0) return;
    Raw("{\"ph\":\"X\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + Us(b0) +
        ",\"dur\":" + Us(b1 - b0) + ",\"name\":\"" + name + "\"" + (args.empty() ? "" : ",\"args\":{" + args + "}") +
        "}");
  }
  void Counter(int64_t pid, const char* name, int64_t ts, const std::string& args) {
    Raw("{\"ph\":\"C\",\"pid\":" + std::to_string(pid) + ",\"ts\":" + Us(ts) + ",\"name\":\"" + name + "\",\"args\":{" +
        args + "}}");
  }

 private:
  std::ostream& out_;
  bool first_ = true;
};

std::string Num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", x);
  return buf;
}

}  // namespace

Status WriteTimeline(const SimRecord& rec, std::ostream& out) {
  const int64_t ranks = rec.ranks_recorded, summary_pid = rec.shard_size;
  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"kvshard simulate\",\"shard_size\":"
      << rec.shard_size << ",\"page_size\":" << rec.page_size << ",\"cp_size\":" << rec.cp_size
      << ",\"layers\":" << rec.layers << ",\"ranks_with_tracks\":" << ranks << ",\"clock\":\"simulated\"},"
      << "\"traceEvents\":[";
  EventWriter w(out);
  for (int64_t r = 0; r < ranks; ++r) {
    w.Meta(r, -1, "process_name", "\"name\":\"rank " + std::to_string(r) + "\"");
    w.Meta(r, -1, "process_sort_index", "\"sort_index\":" + std::to_string(r));
    w.Meta(r, kHostTid, "thread_name", "\"name\":\"host\"");
    w.Meta(r, kCommTid, "thread_name", "\"name\":\"comm (all-gather)\"");
    w.Meta(r, kComputeTid, "thread_name", "\"name\":\"compute\"");
  }
  w.Meta(summary_pid, -1, "process_name",
         "\"name\":\"all " + std::to_string(rec.shard_size) + " ranks (min/mean/max)\"");
  w.Meta(summary_pid, -1, "process_sort_index", "\"sort_index\":" + std::to_string(rec.shard_size));
  const double layers = static_cast<double>(std::max<int64_t>(1, rec.layers));
  for (size_t i = 0; i < rec.batches.size(); ++i) {
    const BatchRow& b = rec.batches[i];
    // The critical path (sim/cost_model.h): plan; layer 0's gather exposed; then per layer compute overlapping
    // the next layer's gather, then staging and rerange. Each phase is shown as one slice of its total time.
    const double gather_layer = b.gather_us / layers;
    const int64_t start = Ns(b.start_us), end = std::max(start, Ns(b.end_us));
    const int64_t plan_end = std::min(end, Ns(b.start_us + b.plan_us));
    const int64_t pack_end = std::min(end, Ns(b.start_us + b.plan_us + b.pack_us));
    const int64_t gather_end = std::min(end, Ns(b.start_us + b.plan_us + b.gather_us));
    const int64_t compute_start = std::min(end, Ns(b.start_us + b.plan_us + gather_layer));
    const int64_t compute_end = std::min(end, Ns(b.start_us + b.plan_us + gather_layer + b.compute_us));
    const int64_t stage_end = std::min(end, Ns(b.start_us + b.plan_us + gather_layer + b.compute_us + b.stage_us));
    const int64_t rerange_end =
        std::min(end, Ns(b.start_us + b.plan_us + gather_layer + b.compute_us + b.stage_us + b.rerange_us));
    const std::string name = "batch " + std::to_string(b.batch_id);
    const std::string args =
        "\"requests\":" + std::to_string(b.requests) + ",\"prefill_tokens\":" + std::to_string(b.prefill_tokens) +
        ",\"compute_tokens\":" + std::to_string(b.compute_tokens) +
        ",\"prefix_pages\":" + std::to_string(b.prefix_pages) +
        ",\"gathered_bytes_per_layer\":" + std::to_string(b.gathered_bytes_layer) +
        ",\"gather_us_per_layer\":" + Num(gather_layer) + ",\"compute_us_per_layer\":" + Num(b.compute_us / layers);
    for (int64_t r = 0; r < ranks; ++r) {
      // The ranks run in lockstep: rank 0's batch slice carries the batch's figures.
      w.Slice(r, kHostTid, name.c_str(), start, end, r == 0 ? args : "");
      w.Slice(r, kHostTid, "plan", start, plan_end);
      w.Slice(r, kCommTid, "pack", plan_end, pack_end);
      w.Slice(r, kCommTid, "all-gather", pack_end, gather_end);
      w.Slice(r, kComputeTid, "compute", compute_start, compute_end);
      w.Slice(r, kComputeTid, "stage", compute_end, stage_end);
      w.Slice(r, kComputeTid, "rerange", stage_end, rerange_end);
      if ((i + 1) * static_cast<size_t>(ranks) <= rec.rank_pages.size()) {
        w.Counter(r, "pages in use", end, "\"pages\":" + std::to_string(rec.RankPages(i, r)));
      }
    }
    w.Counter(summary_pid, "pages in use", end,
              "\"min\":" + std::to_string(b.pages_in_use_min) + ",\"mean\":" + Num(b.pages_in_use_mean) +
                  ",\"max\":" + std::to_string(b.pages_in_use_max));
  }
  out << "\n]}\n";
  out.flush();
  if (!out) return Internal("write failed");
  return Status::Ok();
}

}  // namespace kvshard::sim
