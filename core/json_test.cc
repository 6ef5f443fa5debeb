// Strict JSON reading: duplicate keys with their path, unknown keys, integers outside int64, non-regular files.
#include "core/json.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

namespace kvshard {
namespace {

std::string StrictError(const std::string& text) {
  StatusOr<Json> j = ParseJsonStrict(text, "--batch: in.json", "--batch: ");
  return j.ok() ? "ok" : j.status().message();
}

TEST(JsonTest, DuplicateKeysAreRejectedWithTheirPath) {
  EXPECT_EQ(StrictError(R"({"a":1,"a":2})"), "--batch: a: duplicate key");
  EXPECT_EQ(StrictError(R"({"requests":[{"pages":[1],"seq_len":3,"pages":[2]}]})"),
            "--batch: requests[0].pages: duplicate key");
  EXPECT_EQ(StrictError(R"({"requests":[1,[2,{}],{"x":{"y":1,"y":1}}]})"), "--batch: requests[2].x.y: duplicate key");
  EXPECT_EQ(StrictError(R"({"ops":[{},{},{},{"op":"free","op":"alloc"}]})"), "--batch: ops[3].op: duplicate key");
  // The same key in sibling objects is fine, as are equal strings among values.
  EXPECT_EQ(StrictError(R"({"r":[{"a":1},{"a":2}],"s":{"a":"a"},"t":"a"})"), "ok");
}

// Nesting: kMaxJsonDepth levels parse, one more is refused; 300,000 levels (a 600 KB file) are refused in time
// and memory linear in the input (paths kept per level made it quadratic: ~135 GB at this depth).
TEST(JsonTest, NestingPastTheDepthLimitIsRefused) {
  const auto nested = [](size_t depth, const std::string& inner = "") {
    return std::string(depth, '[') + inner + std::string(depth, ']');
  };
  EXPECT_EQ(StrictError(nested(kMaxJsonDepth)), "ok");
  EXPECT_EQ(StrictError(nested(kMaxJsonDepth + 1)), "--batch: in.json: nested deeper than 128 arrays and objects");
  EXPECT_EQ(StrictError(nested(300000)), "--batch: in.json: nested deeper than 128 arrays and objects");
  EXPECT_EQ(StrictError("{\"a\": " + nested(kMaxJsonDepth - 1) + "}"), "ok");
  EXPECT_EQ(StrictError("{\"a\": " + nested(kMaxJsonDepth) + "}"),
            "--batch: in.json: nested deeper than 128 arrays and objects");
  // A duplicate key at the deepest level still names its whole path.
  EXPECT_EQ(
      StrictError(nested(kMaxJsonDepth - 1, R"({"k":1,"k":2})")), "--batch: " + [] {
        std::string p;
        for (size_t i = 1; i < kMaxJsonDepth; ++i) p += "[0]";
        return p;
      }() + ".k: duplicate key");
  EXPECT_EQ(ParseJsonStrict(nested(kMaxJsonDepth + 1), "").status().message(),
            "nested deeper than 128 arrays and objects");
}

TEST(JsonTest, SyntaxErrorsNameTheSource) {
  EXPECT_EQ(StrictError(R"({"a":)"), "--batch: in.json: not valid JSON (it ends early)");
  EXPECT_EQ(StrictError(""), "--batch: in.json: not valid JSON (it ends early)");
  EXPECT_EQ(StrictError(R"({"a": 1 "b": 2})"), "--batch: in.json: not valid JSON at column 11");
  EXPECT_EQ(StrictError("{\"a\": 1,\n \"b\": [1, 2,, 3]\n}\n"),
            "--batch: in.json: not valid JSON at line 2, column 13");
  const StatusOr<Json> j = ParseJsonStrict(R"({"a":[1,2,{"b":null}]})", "x");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->dump(), R"({"a":[1,2,{"b":null}]})");
}

TEST(JsonTest, UnknownKeysAreRejected) {
  const Json j = Json::parse(R"({"need_sort":true,"need_srot":true})");
  EXPECT_EQ(JsonCheckKeys(j, {"need_sort"}, "ops[3].").message(), "ops[3].need_srot: unknown key");
  EXPECT_TRUE(JsonCheckKeys(j, {"need_sort", "need_srot"}, "").ok());
}

TEST(JsonTest, IntegersOutsideInt64AreOutOfRangeNotNonIntegers) {
  const Json j = Json::parse(R"({"u":18446744073709551615,"big":100000000000000000000,"neg":-9223372036854775809,
                                "f":1.5,"s":"3","ok":7})");
  EXPECT_EQ(JsonInt(j, "u", "r.", 0, 10).status().message(),
            "r.u: out of range (must be in [0, 10]), got 18446744073709551615");
  EXPECT_EQ(JsonInt(j, "big", "", 0, 10).status().message(), "big: out of range (must be in [0, 10]), got 1e+20");
  EXPECT_EQ(JsonInt(j, "neg", "", -5, 10).status().message().substr(0, 38), "neg: out of range (must be in [-5, 10]");
  EXPECT_EQ(JsonInt(j, "f", "", 0, 10).status().message(), "f: must be an integer");
  EXPECT_EQ(JsonInt(j, "s", "", 0, 10).status().message(), "s: must be an integer");
  EXPECT_EQ(JsonInt(j, "ok", "", 0, 10).value(), 7);
  const Json l = Json::parse(R"({"pages":[1,18446744073709551615]})");
  EXPECT_EQ(JsonIntList(l, "pages", "requests[0].", 0, 9).status().message(),
            "requests[0].pages[1]: out of range (must be in [0, 9]), got 18446744073709551615");
}

TEST(JsonTest, OnlyRegularFilesOpen) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  std::ifstream in;
  EXPECT_EQ(OpenInputFile(dir, &in).message(), dir + ": is a directory, not a file");
  const std::string fifo = dir + "/json_test.fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::ifstream in2;
  EXPECT_EQ(OpenInputFile(fifo, &in2).message(), fifo + ": is a FIFO, not a regular file");
  std::ifstream in3;
  EXPECT_EQ(OpenInputFile("/dev/null", &in3).message(), "/dev/null: is a device, not a regular file");
  std::ifstream in4;
  EXPECT_EQ(OpenInputFile(dir + "/no/such", &in4).message(), dir + "/no/such: cannot open file");
  const std::string file = dir + "/json_test.json";
  std::ofstream(file) << R"({"a":1,"a":1})";
  EXPECT_EQ(ReadJsonFile(file).status().message(), file + ": a: duplicate key");
  if (::geteuid() != 0) {  // root reads anything
    ASSERT_EQ(::chmod(file.c_str(), 0), 0);
    EXPECT_EQ(ReadJsonFile(file).status().message(), file + ": cannot open file");
  }
}

TEST(JsonTest, IntegersPastUint64ShownAsWritten) {
  const StatusOr<Json> j = ParseJsonStrict(
      R"({"big":99999999999999999999,"neg":-9223372036854775809,"e":2e19,"twice":[1e30,1000000000000000019884624838656]})",
      "x");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(JsonInt(*j, "big", "", 0, 10).status().message(),
            "big: out of range (must be in [0, 10]), got 99999999999999999999");
  EXPECT_EQ(JsonInt(*j, "neg", "", 0, 10).status().message(),
            "neg: out of range (must be in [0, 10]), got -9223372036854775809");
  EXPECT_EQ(JsonInt(*j, "e", "", 0, 10).status().message(), "e: out of range (must be in [0, 10]), got 2e19");
  // Two texts of one double: which one is meant is unknown, so the double is shown.
  EXPECT_EQ(JsonIntList(*j, "twice", "", 0, 10).status().message(),
            "twice[0]: out of range (must be in [0, 10]), got 1e+30");
}

// JsonInts returns what get<std::vector<int64_t>>() returns for every kind of element, and throws where it throws.
TEST(JsonTest, JsonIntsIsGetOfAnInt64Vector) {
  for (const char* text : {"[]", "[1, -2, 3]", "[9223372036854775807, -9223372036854775808]", "[18446744073709551615]",
                           "[1.5, -2.7]", "[0, 1e3]"}) {
    const Json list = Json::parse(text);
    EXPECT_EQ(JsonInts(list), list.get<std::vector<int64_t>>()) << text;
  }
  for (const char* text : {"3", "{}", "[\"1\"]", "[null]", "[[1]]", "[true]"}) {
    const Json bad = Json::parse(text);
    EXPECT_THROW((void)bad.get<std::vector<int64_t>>(), Json::type_error) << text;
    EXPECT_THROW((void)JsonInts(bad), Json::type_error) << text;
  }
}

}  // namespace
}  // namespace kvshard
