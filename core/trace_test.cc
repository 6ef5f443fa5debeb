// The trace reader (header, records, line numbers, malformed lines) and the expect-subset matcher.
#include "core/trace.h"

#include <sstream>
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
