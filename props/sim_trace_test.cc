// kvshard simulate --emit-trace: emitted traces replay clean through the reference with the simulator's counters
// in their records, a truncated trace closes cleanly, a corrupted expect is caught at its line.
#include "sim/sim_trace.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "replay/replayer.h"
#include "core/trace.h"

namespace kvshard::props {
namespace {

// Conversations of a Mooncake-like workload: turn t of conversation c repeats its first t + 1 blocks and adds
// one, so later turns hit the cache; prompts end mid-page and mid-block.
Workload Conversations(int conversations, int turns) {
  std::string text;
  int64_t ts = 0;
  for (int t = 0; t < turns; ++t) {
    for (int c = 0; c < conversations; ++c) {
      std::string ids;
      for (int b = 0; b <= t + 1; ++b) ids += (b ? ", " : "") + std::to_string(c * 100 + b + (b == t + 1 ? 50 : 0));
      const int64_t len = 512 * (t + 2) - 37 * (c + 1);
      text += "{\"timestamp\": " + std::to_string(ts) + ", \"input_length\": " + std::to_string(len) +
              ", \"output_length\": " + std::to_string(3 + 7 * c) + ", \"hash_ids\": [" + ids + "]}\n";
      ts += 150;
    }
  }
  std::istringstream in(text);
  StatusOr<Workload> w = ReadWorkload(in, WorkloadFormat::kMooncake);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return *w;
}

sim::SimConfig Config(int64_t cache_tokens, bool need_sort = false) {
  sim::SimConfig c;
  c.shard_size = 4;
  c.page_size = 64;
  c.chunked_prefill_size = 1024;
  c.max_prefill_tokens = 2048;
  c.cache_tokens = cache_tokens;
  c.need_sort = need_sort;
  return c;
}

struct Emitted {
  std::string text;
  sim::SimResult result;
  sim::SimTraceCounts counts;
};

Emitted Emit(const Workload& w, const sim::SimConfig& c, int64_t layers, int64_t max_batches = 0) {
  Emitted e;
  sim::SimTraceOptions o;
  o.num_layers = layers;
  o.max_batches = max_batches;
  std::ostringstream out;
  StatusOr<sim::SimTraceCounts> n = sim::SimulateWithTrace(w, c, o, out, &e.result);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  if (n.ok()) e.counts = *n;
  e.text = out.str();
  return e;
}

// Replays `text` through the reference: the first mismatch or malformed line, else OK; *records counts them.
Status ReplayText(const std::string& text, int64_t* records) {
  std::istringstream in(text);
  TraceReader reader(&in);
  KVSHARD_ASSIGN_OR_RETURN(Json header, reader.ReadHeader(replay::TraceHeaderKeys()));
  KVSHARD_ASSIGN_OR_RETURN(std::unique_ptr<replay::Replayer> replayer, replay::Replayer::Create(header));
  TraceRecord record;
  while (true) {
    KVSHARD_ASSIGN_OR_RETURN(bool more, reader.Next(&record));
    if (!more) break;
    KVSHARD_RETURN_IF_ERROR(replayer->Replay(record));
  }
  *records = replayer->summary().records;
  return Status::Ok();
}

// Record counts read back from the trace text.
struct Tally {
  int64_t records = 0, committed = 0, deferred = 0, inserts = 0, declined = 0, duplicates = 0, evicted = 0;
  int64_t begins = 0, matches = 0, locked_matches = 0, unlocks = 0;
  Json last;
};

Tally Count(const std::string& text) {
  Tally t;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    const Json r = Json::parse(line);
    const std::string op = r.at("op");
    const Json e = r.value("expect", Json::object());
    ++t.records;
    if (op == "alloc") (e.at("ok").get<bool>() ? t.committed : t.deferred)++;
    if (op == "insert") {
      ++t.inserts;
      if (e.at("declined").get<bool>()) {
        ++t.declined;
      } else {
        t.duplicates += e.at("freed_pages").get<int64_t>();
      }
    }
    if (op == "evict" && e.contains("freed")) t.evicted += e.at("evicted_pages").get<int64_t>();  // not the closing one
    t.begins += op == "begin_shard_extend";
    t.matches += op == "match_prefix";
    t.locked_matches += op == "match_prefix" && r.value("lock", false);
    t.unlocks += op == "dec_lock_ref";
    t.last = r;
  }
  return t;
}

TEST(SimTraceTest, EmittedTracesReplayCleanWithTheSimulatorsCounts) {
  const Workload w = Conversations(6, 5);
  for (const auto& [cache, need_sort] :
       {std::pair<int64_t, bool>{0, false}, {4 * 64 * 40, false}, {4 * 64 * 40, true}}) {
    for (int64_t layers : {0, 2}) {
      SCOPED_TRACE("cache " + std::to_string(cache) + " need_sort " + std::to_string(need_sort) + " layers " +
                   std::to_string(layers));
      const Emitted e = Emit(w, Config(cache, need_sort), layers);
      ASSERT_EQ(e.result.violations, 0) << e.result.first_violation;
      int64_t records = 0;
      const Status s = ReplayText(e.text, &records);
      ASSERT_TRUE(s.ok()) << s.ToString();
      const Tally t = Count(e.text);
      EXPECT_EQ(records, t.records);
      EXPECT_EQ(records, e.counts.records);
      EXPECT_EQ(t.committed, e.result.batches);
      EXPECT_EQ(e.counts.batches, e.result.batches);
      // A locking match per admission and per relock after a chunk's insert; each lock released once.
      if (e.result.deferrals == 0) {
        EXPECT_EQ(t.locked_matches, e.result.requests + e.result.chunk_inserts);
      } else {  // a deferred pass undid its admissions (unlocked), and they were admitted again later
        EXPECT_GT(t.locked_matches, e.result.requests + e.result.chunk_inserts);
      }
      EXPECT_GE(t.matches, t.locked_matches);
      EXPECT_EQ(t.inserts, e.result.requests + e.result.chunk_inserts);
      EXPECT_EQ(t.unlocks, t.locked_matches);
      EXPECT_EQ(t.declined, e.result.declined_grafts - e.result.chunk_declined_grafts);
      EXPECT_EQ(t.duplicates, e.result.duplicate_pages);
      EXPECT_EQ(t.evicted, e.result.evicted_pages);
      EXPECT_GE(t.deferred, e.result.deferrals);  // a deferred step made one or more deferred tries
      EXPECT_EQ(t.begins, layers > 0 ? e.result.batches : 0);
      EXPECT_FALSE(e.counts.truncated);
      EXPECT_EQ(t.last.at("op"), "free");  // the closing check: every page free again
      EXPECT_EQ(t.last.at("expect").at("class_free_page_counts"),
                Json(std::vector<int64_t>(4, e.result.pool_pages_per_rank)));
      if (cache > 0) {  // the bounded pool exercises the failed try, eviction and retry records
        EXPECT_GT(e.result.evicted_pages, 0);
        EXPECT_GT(t.deferred, 0);
      } else {
        EXPECT_GT(e.result.cached_tokens, 0);
      }
    }
  }
}

TEST(SimTraceTest, TruncatedTraceReleasesWhatItHoldsAndReplaysClean) {
  const Workload w = Conversations(6, 5);
  const Emitted full = Emit(w, Config(4 * 64 * 40), 2);
  const Emitted cut = Emit(w, Config(4 * 64 * 40), 2, 7);
  EXPECT_TRUE(cut.counts.truncated);
  EXPECT_EQ(cut.counts.batches, 7);
  EXPECT_EQ(Count(cut.text).committed, 7);
  EXPECT_EQ(Count(cut.text).begins, 7);
  EXPECT_GT(cut.counts.closing_records, 1);
  EXPECT_LT(cut.text.size(), full.text.size());
  EXPECT_EQ(cut.result.requests, full.result.requests);  // the simulation itself ran to the end
  EXPECT_EQ(cut.result.batches, full.result.batches);
  int64_t records = 0;
  const Status s = ReplayText(cut.text, &records);
  EXPECT_TRUE(s.ok()) << s.ToString();
  // The pipeline's scratch is sized to the emitted batches only: never more than the whole run's.
  EXPECT_LE(cut.counts.max_prefix_tokens, full.counts.max_prefix_tokens);
  EXPECT_GT(full.counts.max_prefix_tokens, 0);
}

// The trace with `from` replaced by `to` on the first line (1-based line number in *line) holding op `op`.
std::string Corrupt(const std::string& text, const std::string& op, const std::string& from, const std::string& to,
                    int64_t* line) {
  std::string out = text;
  size_t at = 0;
  *line = 1;
  while ((at = out.find('\n', at)) != std::string::npos) {
    ++at;
    ++*line;
    if (out.compare(at, 9 + op.size(), "{\"op\": \"" + op + "\"") != 0) continue;
    const size_t hit = out.find(from, at);
    if (hit < out.find('\n', at)) return out.replace(hit, from.size(), to);
  }
  ADD_FAILURE() << "no " << op << " line holds " << from;
  return out;
}

TEST(SimTraceTest, CorruptedExpectIsCaughtAtItsLine) {
  const Emitted e = Emit(Conversations(4, 4), Config(4 * 64 * 40), 2);
  const struct {
    std::string op, from, to, field;
  } cases[] = {
      {"match_prefix", "\"prefix_len\": 512", "\"prefix_len\": 576", "prefix_len: expected 576, got 512"},
      {"insert", "\"declined\": false", "\"declined\": true", "declined: expected true, got false"},
      {"alloc", "\"ok\": true", "\"ok\": false", "ok: expected false, got true"},
      {"evict", "\"cached_pages\": ", "\"cached_pages\": 1", "cached_pages: expected 1"},
      {"begin_shard_extend", "\"epoch\": 3", "\"epoch\": 4", "epoch: expected 4, got 3"},
  };
  for (const auto& c : cases) {
    int64_t line = 0, records = 0;
    const std::string bad = Corrupt(e.text, c.op, c.from, c.to, &line);
    const Status s = ReplayText(bad, &records);
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << c.op << ": " << s.ToString();
    EXPECT_EQ(s.message().rfind("line " + std::to_string(line) + ": " + c.op + ": " + c.field, 0), 0u) << s.message();
  }
}

TEST(SimTraceTest, PipelinePoolTooLargeToReplayNamesTheField) {
  std::string ids = "0";
  for (int b = 1; b < 196; ++b) ids += ", " + std::to_string(b);
  std::istringstream in("{\"timestamp\": 0, \"input_length\": 100000, \"output_length\": 1, \"hash_ids\": [" + ids +
                        "]}\n");
  const Workload w = *ReadWorkload(in, WorkloadFormat::kMooncake);
  sim::SimTraceOptions o;
  o.num_layers = 4096;
  std::ostringstream out;
  sim::SimResult r;
  const StatusOr<sim::SimTraceCounts> n = sim::SimulateWithTrace(w, Config(0), o, out, &r);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(n.status().message().rfind("num_layers: replaying the pipeline of this pool", 0), 0u)
      << n.status().message();
  EXPECT_TRUE(out.str().empty());  // refused before anything was written
}

}  // namespace
}  // namespace kvshard::props
