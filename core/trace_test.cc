// The trace reader (header, records, line numbers, malformed lines) and the expect-subset matcher.
#include "core/trace.h"

#include <sstream>

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

TEST(MatchExpectTest, SubsetsOfObjectsAndElementwiseArrays) {
  const Json got = Json::parse(R"({"a": 1, "b": [1, 2, 3], "ranks": [{"r": 0, "x": [5]}, {"r": 1, "x": [6]}]})");
  int64_t fields = 0;
  EXPECT_FALSE(MatchExpect(Json::parse(R"({"a": 1})"), got, &fields));
  EXPECT_FALSE(MatchExpect(Json::parse(R"({"ranks": [{}, {"x": [6]}]})"), got, &fields));
  EXPECT_EQ(fields, 2);
  auto m = MatchExpect(Json::parse(R"({"ranks": [{}, {"x": [7]}]})"), got, &fields);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->path, "ranks[1].x[0]");
  EXPECT_EQ(m->expected, "7");
  EXPECT_EQ(m->got, "6");
  m = MatchExpect(Json::parse(R"({"b": [1, 2]})"), got, &fields);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->path, "b");
  m = MatchExpect(Json::parse(R"({"c": 1})"), got, &fields);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->path, "c");
  EXPECT_EQ(m->got, "(absent)");
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
