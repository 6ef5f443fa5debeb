// TraceReadAhead against TraceReader: the same records in the same order, the same end, every record prepared once.
#include "core/trace_read_ahead.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace kvshard {
namespace {

// One reader thread (a 2-core machine's), a few, and more than this machine has cores.
constexpr int kThreads[] = {1, 2, 3, 8};

// What TraceReader::Next gives for a whole trace, record by record, and the call that ended it.
struct ReadOut {
  std::vector<std::pair<int64_t, std::string>> records;  // line, compact JSON
  std::string end;                                       // "end" or the error
  int64_t truncated_line = 0;
};

template <typename Reader>
ReadOut ReadEvery(Reader& reader) {
  ReadOut out;
  TraceRecord r;
  while (true) {
    StatusOr<bool> more = reader.Next(&r);
    if (!more.ok() || !*more) {
      out.end = more.ok() ? "end" : more.status().ToString();
      out.truncated_line = reader.truncated_line();
      return out;
    }
    out.records.emplace_back(r.line, r.json.dump());
  }
}

// TraceReadAhead gives what TraceReader gives: every record in order, then the same end (a malformed line, a cut last
// record), also with records larger than its byte bound (read one at a time), more records than its queue holds,
// and ops of several shapes as kvshard writes them (each parsed into a record of its op handed back: reused values).
TEST(TraceReadAheadTest, GivesWhatTheReaderGivesInOrder) {
  const std::string header = "{\"kvshard_trace\": 1}\n";
  std::string many, large, mixed;
  for (int i = 0; i < 1000; ++i) many += "{\"op\": \"place\", \"i\": " + std::to_string(i) + "}\n";
  for (int i = 0; i < 1000; ++i) {  // lists, objects and strings whose sizes and kinds change from record to record
    const std::string n = std::to_string(i);
    switch (i % 4) {
      case 0:
        mixed += "{\"op\":\"alloc\",\"l\":[" + n + ",1,2],\"e\":{\"p\":[[" + n + "],[]],\"s\":\"" + n + "\"}}\n";
        break;
      case 1: mixed += "{\"op\":\"free\",\"locs\":[" + n + "],\"e\":{\"ok\":true}}\n"; break;
      case 2: mixed += "{\"op\":\"alloc\",\"l\":[" + n + "],\"e\":{\"s\":" + n + ",\"p\":{\"q\":[1.5]}}}\n"; break;
      default: mixed += "{\"op\":\"alloc\",\"e\":[" + n + ",\"x\",null],\"l\":{}}\n";
    }
  }
  const std::string big_list(TraceReadAhead::kReadAheadBytes + 10, ' ');
  for (int i = 0; i < 3; ++i) large += "{\"op\": \"x\", \"pad\": [" + big_list + std::to_string(i) + "]}\n";
  const std::string traces[] = {
      header,
      header + many,
      header + many + "{\"op\": 3}\n" + many,
      header + many + "{\"op\": \"cut",
      header + large + many + large,
      header + mixed,
      header + mixed + many + mixed,
  };
  for (int threads : kThreads) {
    for (const std::string& text : traces) {
      SCOPED_TRACE(testing::Message() << threads << " reader threads, trace of " << text.size() << " bytes");
      std::istringstream a(text), b(text);
      TraceReader plain(&a), ahead_reader(&b);
      ASSERT_TRUE(plain.ReadHeader({}).ok());
      ASSERT_TRUE(ahead_reader.ReadHeader({}).ok());
      TraceReadAhead ahead(&ahead_reader, nullptr, threads);
      const ReadOut want = ReadEvery(plain), got = ReadEvery(ahead);
      ASSERT_EQ(got.records.size(), want.records.size());
      for (size_t i = 0; i < want.records.size(); ++i) {
        ASSERT_EQ(got.records[i], want.records[i]) << "record " << i;
      }
      EXPECT_EQ(got.end, want.end);
      EXPECT_EQ(got.truncated_line, want.truncated_line);
      TraceRecord r;
      EXPECT_FALSE(*ahead.Next(&r)) << "Next after the end";
    }
  }
}

// The op a line names first is found in kvshard's own layout only (the readers' choice of a record to reuse).
TEST(TraceReadAheadTest, LeadingOpIsTheOpOfAKvshardWrittenLine) {
  EXPECT_EQ(TraceReadAhead::LeadingOp("{\"op\":\"alloc\",\"l\":[1]}"), "alloc");
  EXPECT_EQ(TraceReadAhead::LeadingOp("{\"op\":\"\"}"), "");
  EXPECT_EQ(TraceReadAhead::LeadingOp("{\"op\": \"alloc\"}"), "");
  EXPECT_EQ(TraceReadAhead::LeadingOp("{\"l\":[1],\"op\":\"alloc\"}"), "");
  EXPECT_EQ(TraceReadAhead::LeadingOp("{\"op\":\"cut"), "");
  EXPECT_EQ(TraceReadAhead::LeadingOp(""), "");
}

// The prepare step sees every record read whole, once, before the caller gets it, and what it keeps travels with the
// record; an exception it throws is rethrown by Next at that record, after every record before it.
// With several reader threads the records are prepared out of order (every seventh slowly) and still given in order.
TEST(TraceReadAheadTest, PreparesEveryRecordBeforeTheCallerGetsIt) {
  struct Seen : TracePrepared {
    int64_t times = 0;
  };
  std::string text = "{\"kvshard_trace\": 1}\n";
  for (int i = 0; i < 500; ++i) text += "{\"op\": \"" + std::string(i == 300 ? "throw" : "place") + "\"}\n";
  for (int threads : kThreads) {
    SCOPED_TRACE(testing::Message() << threads << " reader threads");
    std::istringstream in(text);
    TraceReader reader(&in);
    ASSERT_TRUE(reader.ReadHeader({}).ok());
    TraceReadAhead ahead(
        &reader,
        [](TraceRecord* r, bool) {
          if (r->op == "throw") throw std::runtime_error("prepare failed");
          if (r->line % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
          if (r->prepared == nullptr) r->prepared = std::make_unique<Seen>();
          auto* seen = static_cast<Seen*>(r->prepared.get());
          seen->line = r->line;
          seen->times = 1;
        },
        threads);
    TraceRecord r;
    for (int64_t line = 2; line < 2 + 300; ++line) {
      ASSERT_TRUE(*ahead.Next(&r));
      ASSERT_EQ(r.line, line);
      ASSERT_NE(r.prepared, nullptr);
      EXPECT_EQ(r.prepared->line, line);
      EXPECT_EQ(static_cast<Seen*>(r.prepared.get())->times, 1);
      static_cast<Seen*>(r.prepared.get())->times = 0;  // a record handed back is prepared again when reused
    }
    EXPECT_THROW((void)ahead.Next(&r), std::runtime_error);
  }
}

// Records the caller took but has not reached count as ahead of it: once it took a full queue, every record read while
// it holds them is prepared with `ahead` (the caller takes all ready records at once, so the queue alone would say
// "not ahead" for the next half queue's records, and a fast caller would run their optional work itself).
TEST(TraceReadAheadTest, RecordsTheCallerTookCountAsAhead) {
  constexpr int64_t kQueue = static_cast<int64_t>(TraceReadAhead::kReadAheadRecords);
  std::string text = "{\"kvshard_trace\": 1}\n";
  for (int i = 0; i < 4 * kQueue; ++i) text += "{\"op\": \"place\"}\n";
  for (int threads : {1, 3}) {
    SCOPED_TRACE(testing::Message() << threads << " reader threads");
    // A record is prepared before it is ready: when the caller comes, a reader thread may not have marked a prepared
    // record ready yet, and the caller takes only the records before it. Such a try starts again.
    bool took_full_queue = false;
    for (int attempt = 0; attempt < 100 && !took_full_queue; ++attempt) {
      std::istringstream in(text);
      TraceReader reader(&in);
      ASSERT_TRUE(reader.ReadHeader({}).ok());
      std::mutex mu;
      std::vector<std::pair<int64_t, bool>> prepared;  // line, ahead
      TraceReadAhead ahead(
          &reader,
          [&](TraceRecord* r, bool is_ahead) {
            std::lock_guard<std::mutex> lock(mu);
            prepared.emplace_back(r->line, is_ahead);
          },
          threads);
      const auto prepared_count = [&] {
        std::lock_guard<std::mutex> lock(mu);
        return static_cast<int64_t>(prepared.size());
      };
      // Waits (at most 10 s) until `n` records were prepared; the readers then wait for room.
      const auto wait_for = [&](int64_t n) {
        for (int i = 0; i < 10000 && prepared_count() < n; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return prepared_count() >= n;
      };
      ASSERT_TRUE(wait_for(kQueue)) << prepared_count() << " records prepared";  // a full queue
      TraceRecord r;
      ASSERT_TRUE(*ahead.Next(&r));  // takes every ready record; holds them from now on
      if (static_cast<int64_t>(ahead.held_records()) + 1 < kQueue) continue;
      took_full_queue = true;
      // The queue full again behind them.
      ASSERT_TRUE(wait_for(2 * kQueue)) << prepared_count() << " records prepared";
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& [line, is_ahead] : prepared) {
        if (line >= 2 + kQueue) {
          EXPECT_TRUE(is_ahead) << "line " << line;
        }
      }
    }
    EXPECT_TRUE(took_full_queue) << "in 100 tries, a reader thread never marked a prepared record ready in time";
  }
}

// A malformed line among records parsed on several threads ends the trace there, after every record before it, however
// far the other threads got; the lines after it are never given.
TEST(TraceReadAheadTest, AMalformedLineEndsTheTraceInOrder) {
  std::string text = "{\"kvshard_trace\": 1}\n";
  for (int i = 0; i < 2000; ++i) text += i == 1234 ? "{\"op\": 7}\n" : "{\"op\": \"place\", \"i\": [1, 2, 3]}\n";
  for (int threads : kThreads) {
    std::istringstream in(text);
    TraceReader reader(&in);
    ASSERT_TRUE(reader.ReadHeader({}).ok());
    TraceReadAhead ahead(&reader, nullptr, threads);
    const ReadOut got = ReadEvery(ahead);
    EXPECT_EQ(got.records.size(), 1234u) << threads << " reader threads";
    EXPECT_EQ(got.end, "INVALID_ARGUMENT: line 1236: op: missing or not a string") << threads << " reader threads";
    EXPECT_EQ(ahead.threads(), threads);
  }
}

// The byte bound holds with several reader threads: a record larger than kReadAheadBytes is read only once the caller
// handed back the one before it, so while the caller holds record k no record after k + 1 was read.
TEST(TraceReadAheadTest, LargeRecordsAreReadOneAtATime) {
  const std::string big_list(TraceReadAhead::kReadAheadBytes + 10, ' ');
  std::string text = "{\"kvshard_trace\": 1}\n";
  for (int i = 0; i < 5; ++i) text += "{\"op\": \"x\", \"pad\": [" + big_list + std::to_string(i) + "]}\n";
  for (int threads : kThreads) {
    std::istringstream in(text);
    TraceReader reader(&in);
    ASSERT_TRUE(reader.ReadHeader({}).ok());
    std::atomic<int64_t> prepared{0};
    TraceReadAhead ahead(
        &reader, [&prepared](TraceRecord*, bool) { ++prepared; }, threads);
    TraceRecord r;
    for (int64_t k = 0; k < 5; ++k) {
      ASSERT_TRUE(*ahead.Next(&r));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // time for a reader that would break the bound
      EXPECT_LE(prepared.load(), k + 1) << threads << " reader threads, holding record " << k;
    }
    EXPECT_FALSE(*ahead.Next(&r));
  }
}

// Destroying a TraceReadAhead before the end stops its thread wherever it is.
TEST(TraceReadAheadTest, StopsWhenDestroyedEarly) {
  std::string text = "{\"kvshard_trace\": 1}\n";
  for (int i = 0; i < 5000; ++i) text += "{\"op\": \"place\"}\n";
  for (int threads : kThreads) {
    for (int taken : {0, 1, 100}) {
      std::istringstream in(text);
      TraceReader reader(&in);
      ASSERT_TRUE(reader.ReadHeader({}).ok());
      TraceReadAhead ahead(&reader, nullptr, threads);
      TraceRecord r;
      for (int i = 0; i < taken; ++i) ASSERT_TRUE(*ahead.Next(&r));
    }
  }
}

}  // namespace
}  // namespace kvshard
