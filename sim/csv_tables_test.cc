// The --csv tables: a header and one row per request / batch / batch, and column sums that agree with the
// SimResult (Σ cached_tokens, Σ num_prefill_tokens = extend_tokens, Σ cp_padding_tokens, Σ total_us).
#include "sim/csv_tables.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "sim/output_test_util.h"

namespace kvshard::sim {
namespace {

// A CSV table: the header's columns and each row's fields by column name.
struct Table {
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
  double Sum(const std::string& col) const {
    double s = 0;
    for (const auto& r : rows) s += r.at(col).empty() ? 0 : std::stod(r.at(col));
    return s;
  }
};

std::vector<std::string> Split(const std::string& line) {
  std::vector<std::string> out(1);
  for (char ch : line) {
    if (ch == ',') {
      out.emplace_back();
    } else {
      out.back() += ch;
    }
  }
  return out;
}

Table Parse(const std::string& text) {
  Table t;
  std::istringstream in(text);
  std::string line;
  EXPECT_TRUE(std::getline(in, line));
  t.header = Split(line);
  while (std::getline(in, line)) {
    const std::vector<std::string> f = Split(line);
    EXPECT_EQ(f.size(), t.header.size()) << line;
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < f.size() && i < t.header.size(); ++i) row[t.header[i]] = f[i];
    t.rows.push_back(row);
  }
  return t;
}

template <typename Writer>
Table Write(Writer writer, const SimRecord& rec) {
  std::ostringstream out;
  EXPECT_TRUE(writer(rec, out).ok());
  return Parse(out.str());
}

TEST(CsvTablesTest, RowsAndSumsAgreeWithTheResult) {
  SimConfig c = SmallConfig(4, /*cp=*/2);
  c.cache_tokens = 4 * 64 * 80;
  const Recorded run = RunRecorded(Conversations(60), c);
  const SimResult& r = run.result;
  const Table req = Write(WriteRequestsCsv, run.record);
  EXPECT_EQ(req.header, Split(kRequestsCsvHeader));
  ASSERT_EQ(static_cast<int64_t>(req.rows.size()), r.requests);
  EXPECT_EQ(req.Sum("cached_tokens"), r.cached_tokens);
  EXPECT_EQ(req.Sum("num_prefill_tokens"), r.input_tokens);
  for (const auto& row : req.rows) {
    const double arrived = std::stod(row.at("arrived_at")), prefilled = std::stod(row.at("prefill_completed_at"));
    EXPECT_NEAR(std::stod(row.at("ttft")), prefilled - arrived, 2e-6);
    EXPECT_NEAR(std::stod(row.at("e2e_time")), std::stod(row.at("completed_at")) - arrived, 2e-6);
    EXPECT_LE(std::stod(row.at("scheduled_at")), prefilled);
    EXPECT_GE(std::stoll(row.at("num_chunks")), 1);
  }
  double last = 0;
  for (const auto& row : req.rows) last = std::max(last, std::stod(row.at("completed_at")));
  EXPECT_NEAR(last, r.simulated_s, 1e-6);

  const Table bat = Write(WriteBatchesCsv, run.record);
  EXPECT_EQ(bat.header, Split(kBatchesCsvHeader));
  ASSERT_EQ(static_cast<int64_t>(bat.rows.size()), r.batches);
  EXPECT_EQ(bat.Sum("num_prefill_tokens"), r.extend_tokens);
  EXPECT_EQ(bat.Sum("cp_padding_tokens"), r.cp_padding_tokens);
  EXPECT_EQ(bat.Sum("compute_tokens"), r.cp_compute_tokens);
  EXPECT_EQ(bat.Sum("num_requests"), req.Sum("num_chunks"));
  EXPECT_NEAR(bat.Sum("total_us"), r.batch_time_us.total, 1e-3 * r.batches);
  EXPECT_EQ(bat.Sum("gathered_bytes_per_layer"), r.gathered_bytes_layer.total);
  EXPECT_EQ(std::stoll(bat.rows.back().at("deferrals")), r.deferrals);
  EXPECT_EQ(std::stoll(bat.rows.back().at("evicted_pages")), r.evicted_pages);
  EXPECT_NEAR(std::stod(bat.rows.back().at("prefix_hit_rate_tokens")),
              static_cast<double>(r.cached_tokens) / r.input_tokens, 1e-6);
  double max_in_use = 0;
  for (const auto& row : bat.rows) max_in_use = std::max(max_in_use, std::stod(row.at("pages_in_use_max")));
  EXPECT_EQ(max_in_use, r.pages_in_use_max);

  const Table ranks = Write(WriteRankPagesCsv, run.record);
  EXPECT_EQ(ranks.header, (std::vector<std::string>{"batch_id", "end", "rank_0", "rank_1", "rank_2", "rank_3"}));
  ASSERT_EQ(ranks.rows.size(), bat.rows.size());
  for (size_t i = 0; i < ranks.rows.size(); ++i) {
    double sum = 0;
    for (int k = 0; k < 4; ++k) sum += std::stod(ranks.rows[i].at("rank_" + std::to_string(k)));
    EXPECT_NEAR(sum / 4, std::stod(bat.rows[i].at("pages_in_use_mean")), 1e-3);
  }
}

TEST(CsvTablesTest, EventsThatNeverHappenedAreEmpty) {
  SimRecord rec;
  RequestRow q;
  q.request_id = 3;
  q.arrived_us = 2.5e6;
  q.prefill_tokens = 10;
  rec.requests.push_back(q);
  std::ostringstream out;
  ASSERT_TRUE(WriteRequestsCsv(rec, out).ok());
  EXPECT_EQ(out.str(), std::string(kRequestsCsvHeader) + "\n3,2.500000,,,,10,0,0,0,,,-1\n");
}

}  // namespace
}  // namespace kvshard::sim
