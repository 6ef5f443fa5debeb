// The trace reader (header, records, line numbers, malformed lines) and the expect-subset matcher.
#include "core/trace.h"

#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace kvshard {
namespace {

TEST(TraceReaderTest, ReadsHeaderAndRecordsWithLineNumbers) {
  std::istringstream in(
      "{\"kvshard_trace\": 1, \"allocator\": {}}\n{\"op\": \"place\"}\n{\"op\": \"split\", \"expect\": {}}\n");
  TraceReader reader(&in);
  auto header = reader.ReadHeader({"allocator"});
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  TraceRecord r;
  ASSERT_TRUE(*reader.Next(&r));
  EXPECT_EQ(r.line, 2);
  EXPECT_EQ(r.op, "place");
  ASSERT_TRUE(*reader.Next(&r));
  EXPECT_EQ(r.line, 3);
  EXPECT_EQ(r.op, "split");
  EXPECT_FALSE(*reader.Next(&r));
}

TEST(TraceReaderTest, MalformedLinesNameTheirLine) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "line 1: kvshard_trace: the trace is empty"},
      {"{\"op\": \"place\"}\n", "line 1: kvshard_trace: missing"},
      {"{\"kvshard_trace\": 2}\n", "line 1: kvshard_trace: this build reads version 1, got 2"},
      {"{\"kvshard_trace\": 1, \"pool\": 3}\n", "line 1: pool: unknown header key"},
      {"{\"kvshard_trace\": 1}\n\n", "line 2: record: empty line"},
      {"{\"kvshard_trace\": 1}\n{\"op\": \n", "line 2: record: not valid JSON"},
      {"{\"kvshard_trace\": 1}\n[1]\n", "line 2: record: must be a JSON object"},
      {"{\"kvshard_trace\": 1}\n{\"op\": 3}\n", "line 2: op: missing or not a string"},
      {"{\"kvshard_trace\": 1}\n{\"op\": \"x\", \"expect\": 3}\n", "line 2: expect: must be an object"},
      {"{\"kvshard_trace\": 1, \"kvshard_trace\": 1}\n", "line 1: kvshard_trace: duplicate key"},
      {"{\"kvshard_trace\": 1}\n{\"op\": \"x\", \"expect\": {\"pages\": [1], \"pages\": [2]}}\n",
       "line 2: expect.pages: duplicate key"},
      {"{\"kvshard_trace\": 1}\n{\"op\": \"x\", \"meta\": [1]}\n", "line 2: meta: must be an object"},
      {"{\"kvshard_trace\": 1}\n{\"op\": \"x\", \"meta\": \"rid-7\"}", "line 2: meta: must be an object"},
      {"{\"kvshard_trace\": 1}\n{\"op\": \"x\", \"meta\": {\"s\": \"" + std::string(kMaxTraceMetaBytes, 'a') + "\"}}\n",
       "line 2: meta: must be at most 65536 bytes as compact JSON, got 65544"},
      // Not a truncated record: a broken line that ends with its newline, or one followed by another line.
      {"{\"kvshard_trace\": 1}\n{\"op\": \"x\"\n", "line 2: record: not valid JSON"},
      {"{\"kvshard_trace\": 1}\n{\"op\": \"x\"\n{\"op\": \"x\"}", "line 2: record: not valid JSON"},
      // A last line without its newline that parses is a record; one that parses but is no object is malformed.
      {"{\"kvshard_trace\": 1}\n[1]", "line 2: record: must be a JSON object"},
  };
  for (const auto& [text, want] : cases) {
    std::istringstream in(text);
    TraceReader reader(&in);
    Status s = reader.ReadHeader({}).status();
    TraceRecord r;
    if (s.ok()) s = reader.Next(&r).status();
    EXPECT_NE(s.message().find(want), std::string::npos) << "input " << text << " gave " << s.ToString();
  }
}

TEST(TraceReaderTest, MetaIsAnObjectThatNoRecordKeyCheckCounts) {
  std::istringstream in("{\"kvshard_trace\": 1}\n{\"op\": \"place\", \"locs\": [1], \"meta\": {\"rids\": [\"a\"]}}\n");
  TraceReader reader(&in);
  ASSERT_TRUE(reader.ReadHeader({}).ok());
  TraceRecord r;
  ASSERT_TRUE(*reader.Next(&r));
  EXPECT_EQ(r.json.at("meta"), Json::parse(R"({"rids": ["a"]})"));
  EXPECT_TRUE(CheckRecordKeys(r.json, {"locs"}).ok());
}

// A last line without its '\n' that is not JSON is a truncated record: its own message, and its line recorded.
TEST(TraceReaderTest, ATruncatedLastRecordIsNamedAsSuch) {
  for (const std::string tail : {"{", "{\"op\": \"pla", "{\"op\": \"place\", \"locs\": [1,", "x"}) {
    std::istringstream in("{\"kvshard_trace\": 1}\n{\"op\": \"place\"}\n" + tail);
    TraceReader reader(&in);
    ASSERT_TRUE(reader.ReadHeader({}).ok());
    TraceRecord r;
    ASSERT_TRUE(*reader.Next(&r));
    EXPECT_EQ(reader.truncated_line(), 0);
    const StatusOr<bool> got = reader.Next(&r);
    EXPECT_EQ(got.status().message(), "line 3: truncated last record (no newline, not valid JSON)") << tail;
    EXPECT_EQ(reader.truncated_line(), 3);
  }
  std::istringstream whole("{\"kvshard_trace\": 1}\n{\"op\": \"place\"}");  // only the newline is missing
  TraceReader reader(&whole);
  ASSERT_TRUE(reader.ReadHeader({}).ok());
  TraceRecord r;
  ASSERT_TRUE(*reader.Next(&r));
  EXPECT_FALSE(*reader.Next(&r));
  EXPECT_EQ(reader.truncated_line(), 0);
}

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
// record), also with records larger than its byte bound (read one at a time) and more records than its queue holds.
TEST(TraceReadAheadTest, GivesWhatTheReaderGivesInOrder) {
  const std::string header = "{\"kvshard_trace\": 1}\n";
  std::string many, large;
  for (int i = 0; i < 1000; ++i) many += "{\"op\": \"place\", \"i\": " + std::to_string(i) + "}\n";
  const std::string big_list(TraceReadAhead::kReadAheadBytes + 10, ' ');
  for (int i = 0; i < 3; ++i) large += "{\"op\": \"x\", \"pad\": [" + big_list + std::to_string(i) + "]}\n";
  const std::string traces[] = {
      header,
      header + many,
      header + many + "{\"op\": 3}\n" + many,
      header + many + "{\"op\": \"cut",
      header + large + many + large,
  };
  for (const std::string& text : traces) {
    std::istringstream a(text), b(text);
    TraceReader plain(&a), ahead_reader(&b);
    ASSERT_TRUE(plain.ReadHeader({}).ok());
    ASSERT_TRUE(ahead_reader.ReadHeader({}).ok());
    TraceReadAhead ahead(&ahead_reader);
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

// The prepare step sees every record read whole, once, before the caller gets it, and what it keeps travels with the
// record; an exception it throws is rethrown by Next at that record, after every record before it.
TEST(TraceReadAheadTest, PreparesEveryRecordBeforeTheCallerGetsIt) {
  struct Seen : TracePrepared {
    int64_t times = 0;
  };
  std::string text = "{\"kvshard_trace\": 1}\n";
  for (int i = 0; i < 500; ++i) text += "{\"op\": \"" + std::string(i == 300 ? "throw" : "place") + "\"}\n";
  std::istringstream in(text);
  TraceReader reader(&in);
  ASSERT_TRUE(reader.ReadHeader({}).ok());
  TraceReadAhead ahead(&reader, [](TraceRecord* r, bool) {
    if (r->op == "throw") throw std::runtime_error("prepare failed");
    if (r->prepared == nullptr) r->prepared = std::make_unique<Seen>();
    auto* seen = static_cast<Seen*>(r->prepared.get());
    seen->line = r->line;
    seen->times = 1;
  });
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

// Destroying a TraceReadAhead before the end stops its thread wherever it is.
TEST(TraceReadAheadTest, StopsWhenDestroyedEarly) {
  std::string text = "{\"kvshard_trace\": 1}\n";
  for (int i = 0; i < 5000; ++i) text += "{\"op\": \"place\"}\n";
  for (int taken : {0, 1, 100}) {
    std::istringstream in(text);
    TraceReader reader(&in);
    ASSERT_TRUE(reader.ReadHeader({}).ok());
    TraceReadAhead ahead(&reader);
    TraceRecord r;
    for (int i = 0; i < taken; ++i) ASSERT_TRUE(*ahead.Next(&r));
  }
}

TEST(MatchExpectTest, SubsetsOfObjectsAndElementwiseArrays) {
  const Json got = Json::parse(R"({"a": 1, "b": [1, 2, 3], "ranks": [{"r": 0, "x": [5]}, {"r": 1, "x": [6]}]})");
  int64_t fields = 0;
  EXPECT_FALSE(MatchExpect(Json::parse(R"({"a": 1})"), got, &fields));
  EXPECT_FALSE(MatchExpect(Json::parse(R"({"ranks": [{}, {"x": [6]}]})"), got, &fields));
  EXPECT_EQ(fields, 2);
  auto m = MatchExpect(Json::parse(R"({"ranks": [{}, {"x": [7]}]})"), got, &fields);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->path, "ranks[1].x[0]");
  EXPECT_EQ(m->expected, Json(7));
  EXPECT_EQ(m->got, Json(6));
  EXPECT_EQ(m->ExpectedText(), "7");
  EXPECT_EQ(m->GotText(), "6");
  m = MatchExpect(Json::parse(R"({"b": [1, 2]})"), got, &fields);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->path, "b");
  EXPECT_EQ(m->expected, Json::parse("[1, 2]"));  // the whole values, not cut (the --json rendering keeps them)
  EXPECT_EQ(m->got, Json::parse("[1, 2, 3]"));
  m = MatchExpect(Json::parse(R"({"c": 1})"), got, &fields);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->path, "c");
  EXPECT_FALSE(m->got.has_value());
  EXPECT_EQ(m->GotText(), "(absent)");
}

TEST(CheckRecordKeysTest, UnknownKeysAreNamed) {
  EXPECT_TRUE(CheckRecordKeys(Json::parse(R"({"op": "place", "locs": [1], "expect": {}})"), {"locs"}).ok());
  const Status s = CheckRecordKeys(Json::parse(R"({"op": "place", "lcos": [1]})"), {"locs"});
  EXPECT_EQ(s.message(), "lcos: unknown key for op \"place\"");
}

TEST(TraceWriterTest, WritesTheVersionFirstAndOneRecordPerLine) {
  std::ostringstream out;
  TraceWriter writer(&out);
  ASSERT_TRUE(writer.WriteHeader(Json{{"allocator", {{"shard_size", 2}}}, {"kvshard_trace", 9}}).ok());
  ASSERT_TRUE(writer.WriteRecord(Json{{"op", "free"}, {"locs", {4}}}).ok());
  ASSERT_TRUE(writer.WriteRecordText("{\"op\": \"evict\", \"num_pages\": 1}").ok());
  EXPECT_EQ(writer.records(), 2);
  EXPECT_TRUE(writer.Finish("gen").ok());
  EXPECT_EQ(out.str(),
            "{\"kvshard_trace\":1,\"allocator\":{\"shard_size\":2}}\n{\"op\":\"free\",\"locs\":[4]}\n"
            "{\"op\": \"evict\", \"num_pages\": 1}\n");
  std::istringstream in(out.str());
  TraceReader reader(&in);
  ASSERT_TRUE(reader.ReadHeader({"allocator"}).ok());
}

TEST(TraceWriterTest, AFailedWriteIsAnError) {
  std::ostringstream out;
  out.setstate(std::ios::badbit);
  TraceWriter writer(&out);
  EXPECT_FALSE(writer.WriteHeader(Json::object()).ok());
  const Status s = writer.Finish("--emit-trace");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--emit-trace: write failed");
}

}  // namespace
}  // namespace kvshard
