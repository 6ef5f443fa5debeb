// The workload readers: each format from inline samples, detection, malformed lines (exact messages), and the
// bundled Mooncake and Azure traces (testdata/workloads/).
#include "core/workload.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace kvshard {
namespace {

constexpr char kAzureHeader[] = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
constexpr char kBurstHeader[] = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n";
constexpr char kMooncakeLine[] = R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]})"
                                 "\n";
constexpr char kQwenLine[] =
    R"({"chat_id": 159, "parent_chat_id": -1, "timestamp": 61.114, "input_length": 40, "output_length": 132, )"
    R"("type": "text", "turn": 1, "hash_ids": [1089, 1090, 1091]})"
    "\n";

StatusOr<Workload> Read(const std::string& text, WorkloadFormat format = WorkloadFormat::kAuto) {
  std::istringstream in(text);
  return ReadWorkload(in, format);
}

std::string RunfilePath(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return srcdir ? std::string(srcdir) + "/kvshard/" + path : path;
}

TEST(WorkloadFormatTest, NamesRoundTrip) {
  for (WorkloadFormat f : {WorkloadFormat::kAuto, WorkloadFormat::kMooncake, WorkloadFormat::kAzure,
                           WorkloadFormat::kBurstGpt, WorkloadFormat::kQwen}) {
    auto parsed = ParseWorkloadFormat(WorkloadFormatName(f));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, f);
  }
  auto bad = ParseWorkloadFormat("csv\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "workload format: must be one of auto, mooncake, qwen, azure, burstgpt, got \"csv\\n\"");
}

TEST(WorkloadReadTest, Mooncake) {
  auto w = Read(R"({"timestamp": 1000, "input_length": 1024, "output_length": 7, "hash_ids": [0, 1]})"
                "\n"
                R"({"timestamp": 1000, "input_length": 1025, "output_length": 0, "hash_ids": [0, 1, 2]})"
                "\n"
                R"({"hash_ids": [7], "output_length": 3, "input_length": 1, "timestamp": 2500})"
                "\n",
                WorkloadFormat::kMooncake);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->format, WorkloadFormat::kMooncake);
  EXPECT_EQ(w->block_tokens, 512);
  ASSERT_EQ(w->requests.size(), 3u);
  EXPECT_EQ(w->requests[0].arrival_us, 0);
  EXPECT_EQ(w->requests[0].input_tokens, 1024);
  EXPECT_EQ(w->requests[0].output_tokens, 7);
  EXPECT_EQ(w->requests[0].block_hashes, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(w->requests[1].arrival_us, 0);
  EXPECT_EQ(w->requests[1].block_hashes, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(w->requests[2].arrival_us, 1'500'000);
  EXPECT_EQ(w->requests[2].input_tokens, 1);
  EXPECT_EQ(w->requests[2].block_hashes, (std::vector<int64_t>{7}));
}

TEST(WorkloadReadTest, Qwen) {
  auto w =
      Read(std::string(kQwenLine) + R"({"chat_id": 160, "parent_chat_id": 159, "timestamp": 62.5, "input_length": 48, )"
                                    R"("output_length": 80, "type": "search", "turn": 2, "hash_ids": [1089, 1090, 7]})"
                                    "\n"
                                    R"({"chat_id": 161, "parent_chat_id": -1, "timestamp": 63, "input_length": 1, )"
                                    R"("output_length": 1, "type": "image", "turn": 1, "hash_ids": [8]})"
                                    "\n",
           WorkloadFormat::kQwen);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->format, WorkloadFormat::kQwen);
  EXPECT_EQ(w->block_tokens, 16);
  ASSERT_EQ(w->requests.size(), 3u);
  EXPECT_EQ(w->requests[0].arrival_us, 0);
  EXPECT_EQ(w->requests[0].input_tokens, 40);
  EXPECT_EQ(w->requests[0].output_tokens, 132);
  EXPECT_EQ(w->requests[0].block_hashes, (std::vector<int64_t>{1089, 1090, 1091}));
  EXPECT_EQ(w->requests[1].arrival_us, 1'386'000);  // 62.5 - 61.114 s, rounded to the microsecond
  EXPECT_EQ(w->requests[2].arrival_us, 1'886'000);
  EXPECT_EQ(w->requests[2].block_hashes, (std::vector<int64_t>{8}));
}

TEST(WorkloadReadTest, AzureWithCrlfAndCalendar) {
  auto w = Read(
      "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
      "2024-02-29 23:59:59.9999999,4808,10\r\n"  // leap day; the 7th decimal is truncated
      "2024-03-01 00:00:00.0000001,3180,8\r\n"
      "2024-03-01 00:00:01,1,0\r\n",
      WorkloadFormat::kAzure);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->format, WorkloadFormat::kAzure);
  EXPECT_EQ(w->block_tokens, 0);
  ASSERT_EQ(w->requests.size(), 3u);
  EXPECT_EQ(w->requests[0].arrival_us, 0);
  EXPECT_EQ(w->requests[0].input_tokens, 4808);
  EXPECT_EQ(w->requests[0].output_tokens, 10);
  EXPECT_TRUE(w->requests[0].block_hashes.empty());
  EXPECT_EQ(w->requests[1].arrival_us, 1);
  EXPECT_EQ(w->requests[2].arrival_us, 1'000'001);
}

TEST(WorkloadReadTest, BurstGptWithDecimalsAndQuotes) {
  auto w = Read(std::string(kBurstHeader) +
                    "5,ChatGPT,472,18,490,Conversation log\n"
                    "45.25,GPT-4,1087,230,1317,API log\n"
                    "118.0000005,\"GPT-4\",417,0,417,\"Conversation \"\"log\"\"\"\n",
                WorkloadFormat::kBurstGpt);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->format, WorkloadFormat::kBurstGpt);
  EXPECT_EQ(w->block_tokens, 0);
  ASSERT_EQ(w->requests.size(), 3u);
  EXPECT_EQ(w->requests[0].arrival_us, 0);
  EXPECT_EQ(w->requests[0].input_tokens, 472);
  EXPECT_EQ(w->requests[0].output_tokens, 18);
  EXPECT_EQ(w->requests[1].arrival_us, 40'250'000);
  EXPECT_EQ(w->requests[2].arrival_us, 113'000'000);
  EXPECT_EQ(w->requests[2].output_tokens, 0);
}

TEST(WorkloadReadTest, AutoDetectsEachFormat) {
  const std::tuple<std::string, WorkloadFormat, int64_t> cases[] = {
      {kMooncakeLine, WorkloadFormat::kMooncake, 512},
      {kQwenLine, WorkloadFormat::kQwen, 16},
      {std::string(kAzureHeader) + "2023-11-16 18:17:03.9799600,4808,10\n", WorkloadFormat::kAzure, 0},
      {std::string(kBurstHeader) + "5,ChatGPT,472,18,490,Conversation log\n", WorkloadFormat::kBurstGpt, 0},
      // A byte order mark and blank lines before the first line, spaces before a JSON record.
      {"\xEF\xBB\xBF\n \r\n\t\n  " + std::string(kMooncakeLine) + "\n", WorkloadFormat::kMooncake, 512},
      {"\xEF\xBB\xBF" + std::string(kAzureHeader) + "\n2023-11-16 18:17:03,1,1\n\n", WorkloadFormat::kAzure, 0},
  };
  for (const auto& [text, format, block] : cases) {
    auto w = Read(text);
    ASSERT_TRUE(w.ok()) << text << ": " << w.status().ToString();
    EXPECT_EQ(w->format, format) << text;
    EXPECT_EQ(w->block_tokens, block) << text;
    EXPECT_EQ(w->requests.size(), 1u) << text;
  }
}

TEST(WorkloadReaderTest, StreamsWithLineNumbersAndKeepsItsError) {
  std::istringstream in("\n" + std::string(kMooncakeLine) + "\n" + kMooncakeLine + "{\"timestamp\": 0}\n" +
                        kMooncakeLine);
  auto reader = WorkloadReader::Open(&in, WorkloadFormat::kAuto);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(reader->format(), WorkloadFormat::kMooncake);
  EXPECT_EQ(reader->block_tokens(), 512);
  WorkloadRequest r;
  ASSERT_TRUE(*reader->Next(&r));
  EXPECT_EQ(reader->line(), 2);
  ASSERT_TRUE(*reader->Next(&r));
  EXPECT_EQ(reader->line(), 4);
  for (int i = 0; i < 2; ++i) {  // the error stays
    auto next = reader->Next(&r);
    ASSERT_FALSE(next.ok());
    EXPECT_EQ(next.status().message(), "line 5: input_length: missing");
  }
}

TEST(WorkloadReaderTest, EndsAfterTheLastRequest) {
  std::istringstream in(std::string(kAzureHeader) + "2023-11-16 18:17:03,1,1\n");
  auto reader = WorkloadReader::Open(&in, WorkloadFormat::kAzure);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(reader->line(), 1);
  WorkloadRequest r;
  EXPECT_TRUE(*reader->Next(&r));
  EXPECT_FALSE(*reader->Next(&r));
  EXPECT_FALSE(*reader->Next(&r));
}

// Each malformed input and the exact message it must give (all InvalidArgument).
struct Malformed {
  WorkloadFormat format;
  std::string text;
  std::string message;
};

void ExpectErrors(const std::vector<Malformed>& cases) {
  for (const Malformed& c : cases) {
    auto w = Read(c.text, c.format);
    ASSERT_FALSE(w.ok()) << "accepted: " << c.text;
    EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_EQ(w.status().message(), c.message) << "input: " << c.text;
  }
}

TEST(WorkloadErrorsTest, EmptyAndUnknown) {
  const auto kAuto = WorkloadFormat::kAuto;
  ExpectErrors({
      {kAuto, "", "line 1: workload: empty (no requests)"},
      {WorkloadFormat::kMooncake, "\n  \n\r\n", "line 4: workload: empty (no requests)"},
      {kAuto, kAzureHeader, "line 2: workload: no requests after the header"},
      {WorkloadFormat::kBurstGpt, std::string(kBurstHeader) + "\n\n", "line 4: workload: no requests after the header"},
      {kAuto, "hello,\x01world\n",
       "line 1: header: not a known workload format, got \"hello,\\x01world\" (expected JSON Lines records, or the "
       "CSV header \"TIMESTAMP,ContextTokens,GeneratedTokens\" or \"Timestamp,Model,Request tokens,Response tokens,"
       "Total tokens,Log Type\")"},
      {kAuto, "[1, 2]\n",
       "line 1: header: not a known workload format, got \"[1, 2]\" (expected JSON Lines records, or the "
       "CSV header \"TIMESTAMP,ContextTokens,GeneratedTokens\" or \"Timestamp,Model,Request tokens,Response tokens,"
       "Total tokens,Log Type\")"},
  });
}

TEST(WorkloadErrorsTest, MooncakeLines) {
  const auto kMooncake = WorkloadFormat::kMooncake;
  const std::string ok = kMooncakeLine;
  const std::string keys = "(a Mooncake record has timestamp, input_length, output_length, hash_ids)";
  ExpectErrors({
      {kMooncake, "{\"timestamp\": 0,\n", "line 1: record: not valid JSON (it ends early)"},
      // Deep nesting (printing the record recursed past the stack: a segfault at 300,000 levels).
      {kMooncake, std::string(300000, '[') + std::string(300000, ']'),
       "line 1: record: nested deeper than 128 arrays and objects"},
      {kMooncake, "{\"timestamp\": " + std::string(300000, '[') + std::string(300000, ']') + "}",
       "line 1: record: nested deeper than 128 arrays and objects"},
      {kMooncake,  // 128 levels (the object and 127 arrays) parse
       R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": )" + std::string(127, '[') +
           std::string(127, ']') + "}",
       "line 1: hash_ids[0]: must be an integer"},
      {kMooncake, "2023-11-16 18:17:03,1,1\n", "line 1: record: not valid JSON at column 7"},
      {kMooncake, ok + "[1, 2]\n", "line 2: record: must be a JSON object, got [1,2]"},
      {kMooncake, R"({"timestamp": 1e400})", "line 1: record: not valid JSON (a number out of range)"},
      {WorkloadFormat::kAuto,
       ok + R"({"timestamp": 0, "input_length": 1, "output_length": 5, "hash_ids": [1], "model": "x"})",
       "line 2: model: unknown key " + keys},
      {kMooncake, "{\"a\\u0001\\n\": 1}", "line 1: a\\x01\\n: unknown key " + keys},
      {kMooncake, R"({"timestamp": 0, "input_length": 1, "timestamp": 1, "output_length": 5, "hash_ids": [1]})",
       "line 1: timestamp: duplicate key"},
      {kMooncake, R"({"input_length": 1, "output_length": 5, "hash_ids": [1]})", "line 1: timestamp: missing"},
      {kMooncake, R"({"timestamp": 0, "input_length": 1, "output_length": 5})", "line 1: hash_ids: missing"},
      {kMooncake, R"({"timestamp": -1, "input_length": 1, "output_length": 5, "hash_ids": [1]})",
       "line 1: timestamp: must be in [0, 1000000000000], got -1"},
      {kMooncake, R"({"timestamp": 0.5, "input_length": 1, "output_length": 5, "hash_ids": [1]})",
       "line 1: timestamp: must be an integer"},
      {kMooncake, R"({"timestamp": 0, "input_length": -5, "output_length": 5, "hash_ids": []})",
       "line 1: input_length: must be in [1, 2147483648], got -5"},
      {kMooncake, R"({"timestamp": 0, "input_length": 12.5, "output_length": 5, "hash_ids": [1]})",
       "line 1: input_length: must be an integer"},
      {kMooncake, R"({"timestamp": 0, "input_length": "600", "output_length": 5, "hash_ids": [1, 2]})",
       "line 1: input_length: must be an integer"},
      {kMooncake, R"({"timestamp": 0, "input_length": 18446744073709551615, "output_length": 5, "hash_ids": []})",
       "line 1: input_length: out of range (must be in [1, 2147483648]), got 18446744073709551615"},
      {kMooncake, R"({"timestamp": 0, "input_length": 1, "output_length": 2147483649, "hash_ids": [1]})",
       "line 1: output_length: must be in [0, 2147483648], got 2147483649"},
      {kMooncake, R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1]})",
       "line 1: hash_ids: 1 ids, but input_length 600 needs ceil(600 / 512) = 2"},
      {kMooncake, R"({"timestamp": 0, "input_length": 512, "output_length": 5, "hash_ids": [1, 2]})",
       "line 1: hash_ids: 2 ids, but input_length 512 needs ceil(512 / 512) = 1"},
      {kMooncake, R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, -1]})",
       "line 1: hash_ids[1]: must be in [0, 9223372036854775807], got -1"},
      {kMooncake, R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": ["a", 1]})",
       "line 1: hash_ids[0]: must be an integer"},
      {kMooncake, R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": 3})",
       "line 1: hash_ids: must be an array of integers"},
      {kMooncake,
       R"({"timestamp": 2000, "input_length": 1, "output_length": 5, "hash_ids": [1]})"
       "\n\n"
       R"({"timestamp": 1500, "input_length": 1, "output_length": 5, "hash_ids": [1]})",
       "line 3: timestamp: goes backwards: 1500 after 2000 (requests must be in arrival order)"},
  });
}

TEST(WorkloadErrorsTest, QwenLines) {
  const auto kQwen = WorkloadFormat::kQwen;
  const std::string head = R"({"chat_id": 1, "parent_chat_id": -1, )";
  ExpectErrors({
      {kQwen, kMooncakeLine, "line 1: chat_id: missing"},
      {WorkloadFormat::kAuto,
       head +
           R"("timestamp": 0, "input_length": 1, "output_length": 1, "type": "text", "turn": 1, "hash_ids": [1], "session_id": "7"})",
       "line 1: session_id: unknown key (a Qwen record has chat_id, parent_chat_id, timestamp, input_length, "
       "output_length, type, turn, hash_ids)"},
      {kQwen,
       R"({"chat_id": 1, "parent_chat_id": -2, "timestamp": 0, "input_length": 1, "output_length": 1, "type": "text", "turn": 1, "hash_ids": [1]})",
       "line 1: parent_chat_id: must be in [-1, 9223372036854775807], got -2"},
      {kQwen,
       head +
           R"("timestamp": "61", "input_length": 1, "output_length": 1, "type": "text", "turn": 1, "hash_ids": [1]})",
       "line 1: timestamp: must be a number of seconds, got \"61\""},
      {kQwen,
       head +
           R"("timestamp": -0.5, "input_length": 1, "output_length": 1, "type": "text", "turn": 1, "hash_ids": [1]})",
       "line 1: timestamp: must be in [0, 1000000000] seconds, got -0.5"},
      {kQwen,
       head + R"("timestamp": 0, "input_length": 1, "output_length": 1, "type": "", "turn": 1, "hash_ids": [1]})",
       "line 1: type: must be a non-empty string, got \"\""},
      {kQwen,
       head + R"("timestamp": 0, "input_length": 1, "output_length": 1, "type": "a\nb", "turn": 0, "hash_ids": [1]})",
       "line 1: turn: must be in [1, 9223372036854775807], got 0"},
      {kQwen,
       head +
           R"("timestamp": 0, "input_length": 40, "output_length": 1, "type": "text", "turn": 1, "hash_ids": [1, 2]})",
       "line 1: hash_ids: 2 ids, but input_length 40 needs ceil(40 / 16) = 3"},
      {kQwen,
       head +
           R"("timestamp": 62.5, "input_length": 1, "output_length": 1, "type": "text", "turn": 1, "hash_ids": [1]})"
           "\n" +
           kQwenLine,
       "line 2: timestamp: goes backwards: 61.114 after 62.5 (requests must be in arrival order)"},
  });
}

TEST(WorkloadErrorsTest, AzureRows) {
  const auto kAzure = WorkloadFormat::kAzure;
  const std::string h = kAzureHeader;
  ExpectErrors({
      {kAzure, "TIMESTAMP,ContextTokens\n2023-11-16 18:17:03,1\n",
       "line 1: header: expected \"TIMESTAMP,ContextTokens,GeneratedTokens\", got \"TIMESTAMP,ContextTokens\""},
      {kAzure, kMooncakeLine,
       "line 1: header: expected \"TIMESTAMP,ContextTokens,GeneratedTokens\", got \"{\\\"timestamp\\\": 0, "
       "\\\"input_length\\\": 600, \\\"output_length\\\": 5, \u2026\" (77 bytes)"},
      {kAzure, h + "2023-11-16 18:17:03.9799600,4808\n",
       "line 2: row: 2 columns, expected 3 (TIMESTAMP,ContextTokens,GeneratedTokens)"},
      {kAzure, h + "2023/11/16 18:17:03,1,1\n",
       "line 2: TIMESTAMP: must be a date and time YYYY-MM-DD HH:MM:SS[.fraction], got \"2023/11/16 18:17:03\""},
      {kAzure, h + "2023-11-16 18:17:03.,1,1\n",
       "line 2: TIMESTAMP: must be a date and time YYYY-MM-DD HH:MM:SS[.fraction], got \"2023-11-16 18:17:03.\""},
      {kAzure, h + "2023-11-16 18:17:03\x01,1,1\n",
       "line 2: TIMESTAMP: must be a date and time YYYY-MM-DD HH:MM:SS[.fraction], got \"2023-11-16 18:17:03\\x01\""},
      {kAzure, h + "2023-02-29 00:00:00,1,1\n", "line 2: TIMESTAMP: no such date and time: \"2023-02-29 00:00:00\""},
      {kAzure, h + "2023-11-16 24:00:00,1,1\n", "line 2: TIMESTAMP: no such date and time: \"2023-11-16 24:00:00\""},
      {kAzure, h + "2023-11-16 18:17:03,-3,1\n", "line 2: ContextTokens: must be in [1, 2147483648], got -3"},
      {kAzure, h + "2023-11-16 18:17:03,12a,1\n", "line 2: ContextTokens: must be an integer, got \"12a\""},
      {kAzure, h + "2023-11-16 18:17:03,1,\n", "line 2: GeneratedTokens: must be an integer, got \"\""},
      {kAzure, h + "2023-11-16 18:17:03,1,99999999999999999999\n",
       "line 2: GeneratedTokens: must be in [0, 2147483648], got 99999999999999999999"},
      {kAzure, h + "\"2023-11-16 18:17:03,1,1\n", "line 2: row: column 1: unterminated quote"},
      {kAzure, h + "2023-11-16 18:17:04.0000000,1,1\n2023-11-16 18:17:03.0000000,1,1\n",
       "line 3: TIMESTAMP: goes backwards: 2023-11-16 18:17:03.0000000 after 2023-11-16 18:17:04.0000000 "
       "(requests must be in arrival order)"},
      {kAzure, h + "2023-11-16 18:17:04,1,1\n2060-01-01 00:00:00,1,1\n",
       "line 3: TIMESTAMP: 2060-01-01 00:00:00 is more than 1000000000000000 us after the first request"},
  });
}

TEST(WorkloadErrorsTest, BurstGptRows) {
  const auto kBurst = WorkloadFormat::kBurstGpt;
  const std::string h = kBurstHeader;
  ExpectErrors({
      {kBurst, "Timestamp,Model,Request tokens,Response tokens,Total tokens\n",
       "line 1: header: expected \"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\", got "
       "\"Timestamp,Model,Request tokens,Response tokens,Total tokens\""},
      {kBurst, h + "5,ChatGPT,472,18,490,Conversation log,x\n",
       "line 2: row: 7 columns, expected 6 (Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type)"},
      {kBurst, h + "-5,ChatGPT,472,18,490,API log\n",
       "line 2: Timestamp: must be a non-negative number of seconds (digits, optional decimals), got \"-5\""},
      {kBurst, h + "1e3,ChatGPT,472,18,490,API log\n",
       "line 2: Timestamp: must be a non-negative number of seconds (digits, optional decimals), got \"1e3\""},
      {kBurst, h + "2000000000,ChatGPT,472,18,490,API log\n",
       "line 2: Timestamp: must be at most 1000000000 seconds, got 2000000000"},
      {kBurst, h + "5,,472,18,490,API log\n", "line 2: Model: must not be empty"},
      {kBurst, h + "5,ChatGPT,4.5,18,490,API log\n", "line 2: Request tokens: must be an integer, got \"4.5\""},
      {kBurst, h + "5,ChatGPT,472,-18,454,API log\n", "line 2: Response tokens: must be in [0, 2147483648], got -18"},
      {kBurst, h + "5,ChatGPT,472,18,500,API log\n",
       "line 2: Total tokens: 500, but Request tokens + Response tokens = 490"},
      {kBurst, h + "5,ChatGPT,472,18,490,\n", "line 2: Log Type: must not be empty"},
      {kBurst, h + "5,\"ChatGPT\"x,472,18,490,API log\n", "line 2: row: column 2: text after the closing quote"},
      {kBurst, h + "5,Chat\"GPT,472,18,490,API log\n", "line 2: row: column 2: quote inside an unquoted column"},
      {kBurst, h + "45,ChatGPT,472,18,490,API log\n5.5,ChatGPT,472,18,490,API log\n",
       "line 3: Timestamp: goes backwards: 5.5 after 45 (requests must be in arrival order)"},
  });
}

TEST(WorkloadBundledTest, MooncakeConversationTrace) {
  std::ifstream in(RunfilePath("testdata/workloads/mooncake_conversation_trace.jsonl"));
  ASSERT_TRUE(in) << "cannot open the bundled Mooncake trace";
  const auto start = std::chrono::steady_clock::now();
  auto w = ReadWorkload(in, WorkloadFormat::kAuto);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  RecordProperty("read_ms", std::to_string(ms));
  std::cout << "read 12,031 Mooncake requests in " << ms << " ms\n";
  EXPECT_EQ(w->format, WorkloadFormat::kMooncake);
  EXPECT_EQ(w->block_tokens, 512);
  ASSERT_EQ(w->requests.size(), 12031u);
  // {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, ..., 13]}
  const WorkloadRequest& first = w->requests.front();
  EXPECT_EQ(first.arrival_us, 0);
  EXPECT_EQ(first.input_tokens, 6758);
  EXPECT_EQ(first.output_tokens, 500);
  EXPECT_EQ(first.block_hashes, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  // The last one: {"timestamp": 3536999, "input_length": 20774, "output_length": 508, "hash_ids": [0, 182750, ...]}
  const WorkloadRequest& last = w->requests.back();
  EXPECT_EQ(last.arrival_us, 3'536'999'000);
  EXPECT_EQ(last.input_tokens, 20774);
  EXPECT_EQ(last.output_tokens, 508);
  ASSERT_EQ(last.block_hashes.size(), 41u);
  EXPECT_EQ(last.block_hashes[1], 182750);
}

TEST(WorkloadBundledTest, AzureCodeTrace) {
  std::ifstream in(RunfilePath("testdata/workloads/azure2023_AzureLLMInferenceTrace_code.csv"));
  ASSERT_TRUE(in) << "cannot open the bundled Azure trace";
  auto w = ReadWorkload(in, WorkloadFormat::kAuto);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->format, WorkloadFormat::kAzure);
  EXPECT_EQ(w->block_tokens, 0);
  ASSERT_EQ(w->requests.size(), 8819u);  // the header and 8,819 requests (the last line has no newline)
  // 2023-11-16 18:17:03.9799600,4808,10 then 2023-11-16 18:17:04.0319600,3180,8
  EXPECT_EQ(w->requests[0].arrival_us, 0);
  EXPECT_EQ(w->requests[0].input_tokens, 4808);
  EXPECT_EQ(w->requests[0].output_tokens, 10);
  EXPECT_EQ(w->requests[1].arrival_us, 52'000);
  EXPECT_EQ(w->requests[1].input_tokens, 3180);
  // The last: 2023-11-16 19:14:19.9280160,549,173 (57 min 15.948056 s after the first).
  EXPECT_EQ(w->requests.back().arrival_us, 3'435'948'056);
  EXPECT_EQ(w->requests.back().input_tokens, 549);
  EXPECT_EQ(w->requests.back().output_tokens, 173);
}

}  // namespace
}  // namespace kvshard
