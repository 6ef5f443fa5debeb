// The --timeline writer: valid trace-event JSON with rank/stream metadata, X slices on the cost model's critical
// path that never overlap on a track, and counters equal to the simulator's pages in use.
#include "sim/timeline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "core/json.h"
#include "sim/output_test_util.h"

namespace kvshard::sim {
namespace {

Json Timeline(const SimRecord& rec, size_t* bytes = nullptr) {
  std::ostringstream out;
  EXPECT_TRUE(WriteTimeline(rec, out).ok());
  if (bytes) *bytes = out.str().size();
  Json j = Json::parse(out.str(), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not valid JSON";
  return j;
}

// Microseconds rounded as the writer rounds them (to the nanosecond).
double Rounded(double us) { return std::llround(us * 1000.0) / 1000.0; }

void CheckTimeline(const Recorded& run) {
  const SimRecord& rec = run.record;
  const Json j = Timeline(rec);
  ASSERT_TRUE(j.contains("traceEvents") && j["traceEvents"].is_array());
  std::map<int64_t, std::string> process_names;
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;
  std::map<std::pair<int64_t, int64_t>, int64_t> track_end;  // ns  // per (pid, tid): end of the last non-batch slice
  std::map<int64_t, int64_t> batch_end;                      // ns
  std::map<int64_t, size_t> counters, batches;
  std::map<std::pair<int64_t, std::string>, double> busy;  // per rank and slice name: Σ dur
  const std::set<std::string> names = {"plan", "pack", "all-gather", "compute", "stage", "rerange"};
  std::pair<int64_t, int64_t> open_batch{0, 0};  // ns
  for (const Json& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    const int64_t pid = e["pid"];
    if (ph == "M") {
      if (e["name"] == "process_name") process_names[pid] = e["args"]["name"];
      if (e["name"] == "thread_name") thread_names[{pid, e["tid"].get<int64_t>()}] = e["args"]["name"];
      continue;
    }
    const double ts = e["ts"];
    if (ph == "C") {
      ASSERT_LT(pid, rec.shard_size + 1);
      const size_t i = counters[pid]++;
      ASSERT_LT(i, rec.batches.size());
      EXPECT_DOUBLE_EQ(ts, Rounded(rec.batches[i].end_us));
      if (pid == rec.shard_size) {
        EXPECT_EQ(e["args"]["min"], rec.batches[i].pages_in_use_min);
        EXPECT_EQ(e["args"]["max"], rec.batches[i].pages_in_use_max);
        EXPECT_NEAR(e["args"]["mean"].get<double>(), rec.batches[i].pages_in_use_mean, 1e-4);
      } else {
        EXPECT_EQ(e["args"]["pages"], rec.RankPages(i, pid)) << "batch " << i << " rank " << pid;
      }
      continue;
    }
    ASSERT_EQ(ph, "X");
    const int64_t tid = e["tid"];
    const double dur = e["dur"];
    EXPECT_GT(dur, 0);
    // Integer nanoseconds, as written, so ordering is checked exactly.
    const int64_t t0 = std::llround(ts * 1000), t1 = t0 + std::llround(dur * 1000);
    ASSERT_LT(pid, rec.ranks_recorded);
    const std::string name = e["name"];
    if (name.rfind("batch ", 0) == 0) {
      const size_t i = batches[pid]++;
      EXPECT_EQ(name, "batch " + std::to_string(i));
      EXPECT_DOUBLE_EQ(ts, Rounded(rec.batches[i].start_us));
      EXPECT_NEAR(ts + dur, Rounded(rec.batches[i].end_us), 1e-6 * (1 + ts));
      EXPECT_GE(t0, batch_end[pid]);  // batch slices never overlap
      batch_end[pid] = t1;
      EXPECT_EQ(e.contains("args"), pid == 0);
      open_batch = {t0, t1};
      continue;
    }
    ASSERT_TRUE(names.count(name)) << name;
    EXPECT_EQ(tid, name == "plan"                             ? kHostTid
                   : (name == "all-gather" || name == "pack") ? kCommTid
                                                              : kComputeTid)
        << name;
    // Inside the current batch, and in order on its track without overlap.
    EXPECT_GE(t0, open_batch.first);
    EXPECT_LE(t1, open_batch.second);
    const std::pair<int64_t, int64_t> track{pid, tid};
    EXPECT_GE(t0, track_end[track]) << name;
    track_end[track] = t1;
    busy[std::make_pair(pid, name)] += dur;
  }
  for (int64_t r = 0; r < rec.ranks_recorded; ++r) {
    EXPECT_EQ(process_names[r], "rank " + std::to_string(r));
    EXPECT_EQ(thread_names[std::make_pair(r, int64_t{kHostTid})], "host");
    EXPECT_EQ(thread_names[std::make_pair(r, int64_t{kCommTid})], "comm (all-gather)");
    EXPECT_EQ(thread_names[std::make_pair(r, int64_t{kComputeTid})], "compute");
    EXPECT_EQ(batches[r], rec.batches.size());
    EXPECT_EQ(counters[r], rec.batches.size());
  }
  EXPECT_EQ(process_names.size(), static_cast<size_t>(rec.ranks_recorded) + 1);  // + the min/mean/max process
  EXPECT_EQ(counters[rec.shard_size], rec.batches.size());
  double compute = 0, gather = 0, pack = 0, rerange = 0;
  for (const BatchRow& b : rec.batches) {
    compute += b.compute_us, gather += b.gather_us - b.pack_us, pack += b.pack_us, rerange += b.rerange_us;
  }
  const double tol = 2e-3 * static_cast<double>(rec.batches.size());
  EXPECT_NEAR(busy[std::make_pair(int64_t{0}, std::string("compute"))], compute, tol);
  EXPECT_NEAR(busy[std::make_pair(int64_t{0}, std::string("all-gather"))], gather, tol);
  EXPECT_NEAR(busy[std::make_pair(int64_t{0}, std::string("pack"))], pack, tol);
  EXPECT_NEAR(busy[std::make_pair(int64_t{0}, std::string("rerange"))], rerange, tol);
  EXPECT_GT(gather, 0);  // the conversations share prefixes: later batches gather
}

TEST(TimelineTest, SmallRunWithCp) { CheckTimeline(RunRecorded(Conversations(40), SmallConfig(4, /*cp=*/2))); }

TEST(TimelineTest, BoundedCacheDefersAndEvicts) {
  SimConfig c = SmallConfig(4);
  c.cache_tokens = 4 * 64 * 60;
  const Recorded run = RunRecorded(Conversations(60), c);
  EXPECT_GT(run.result.evicted_pages, 0);
  CheckTimeline(run);
}

TEST(TimelineTest, ManyRanksGetBoundedTracksAndASummary) {
  const Recorded run = RunRecorded(Conversations(24), SmallConfig(40));
  CheckTimeline(run);
  size_t bytes = 0;
  const Json j = Timeline(run.record, &bytes);
  std::set<int64_t> pids;
  for (const Json& e : j["traceEvents"]) pids.insert(e["pid"].get<int64_t>());
  EXPECT_EQ(pids.size(), static_cast<size_t>(SimRecord::kMaxRanks) + 1);
  EXPECT_TRUE(pids.count(40));
  // Bounded: at most ~600 bytes per batch and recorded rank, whatever N is.
  EXPECT_LT(bytes, 4000 + 600 * run.record.batches.size() * SimRecord::kMaxRanks);
}

TEST(TimelineTest, EmptyRecordIsValid) {
  SimRecord rec;
  rec.shard_size = 2;
  rec.ranks_recorded = 2;
  const Json j = Timeline(rec);
  EXPECT_EQ(j["traceEvents"].size(), 2u * 5 + 2);  // metadata only
}

}  // namespace
}  // namespace kvshard::sim
