// The --plots charts: six well-formed SVGs with the series the docs promise (per-rank lines, the min-max band
// and mean, the hit-rate lines, a padding histogram whose bars count the batches), bounded in points.
#include "sim/plots.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "sim/output_test_util.h"

namespace kvshard::sim {
namespace {

std::map<std::string, SvgChart> Charts(const SimRecord& rec) {
  std::map<std::string, SvgChart> out;
  for (const Plot& p : BuildPlots(rec)) out[p.file] = p.chart;
  return out;
}

// The largest number of points of any polyline in `svg`.
size_t MaxPolylinePoints(const std::string& svg) {
  size_t most = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) {
    const size_t a = svg.find("points=\"", at) + 8, b = svg.find('"', a);
    most = std::max<size_t>(most, std::count(svg.begin() + a, svg.begin() + b, ' '));
  }
  return most;
}

TEST(PlotsTest, SixWellFormedChartsWithTheirSeries) {
  const Recorded run = RunRecorded(Conversations(40), SmallConfig(4, /*cp=*/2));
  const auto charts = Charts(run.record);
  ASSERT_EQ(charts.size(), 6u);
  for (const auto& [file, chart] : charts) {
    const std::string svg = RenderSvg(chart);
    const XmlShape shape = CheckXml(svg);
    EXPECT_EQ(shape.error, "") << file;
    EXPECT_EQ(shape.root, "svg") << file;
    EXPECT_TRUE(shape.root_attrs.count("width") && shape.root_attrs.count("height")) << file;
    EXPECT_FALSE(chart.title.empty()) << file;
    EXPECT_FALSE(chart.x_label.empty() || chart.y_label.empty()) << file;
    const int lines = shape.counts.count("polyline") ? shape.counts.at("polyline") : 0;
    EXPECT_EQ(lines, static_cast<int>(chart.lines.size())) << file;
  }
  const SvgChart& pages = charts.at("pages_in_use.svg");
  ASSERT_EQ(pages.lines.size(), 5u);  // ranks 0..3 and the mean
  EXPECT_EQ(pages.bands.size(), 1u);
  EXPECT_EQ(pages.lines[2].y.size(), run.record.batches.size());
  EXPECT_EQ(pages.lines[2].y.back(), run.record.RankPages(run.record.batches.size() - 1, 2));
  const SvgChart& hit = charts.at("prefix_hit_rate.svg");
  ASSERT_EQ(hit.lines.size(), 2u);  // tokens and blocks (the workload has block ids)
  EXPECT_NEAR(hit.lines[0].y.back(), static_cast<double>(run.result.cached_tokens) / run.result.input_tokens, 1e-12);
  EXPECT_NEAR(hit.lines[1].y.back(), static_cast<double>(run.result.hit_blocks) / run.result.hash_blocks, 1e-12);
  const SvgChart& gathered = charts.at("gathered_bytes.svg");
  EXPECT_EQ(*std::max_element(gathered.lines[0].y.begin(), gathered.lines[0].y.end()),
            run.result.gathered_bytes_layer.max / (1024.0 * 1024.0));
  // The TTFT CDF: one point per prefilled request, rising to 1, its median the run's p50.
  const SvgChart& cdf = charts.at("ttft_cdf.svg");
  ASSERT_EQ(cdf.lines.size(), 1u);
  ASSERT_EQ(cdf.lines[0].x.size(), static_cast<size_t>(run.result.requests));
  EXPECT_EQ(cdf.lines[0].y.back(), 1.0);
  EXPECT_TRUE(std::is_sorted(cdf.lines[0].x.begin(), cdf.lines[0].x.end()));
  EXPECT_NEAR(cdf.lines[0].x[(cdf.lines[0].x.size() + 1) / 2 - 1], run.result.ttft_ms.p50 / 1e3, 1e-9);
  // The queue: a step per arrival and first chunk, never negative, empty at the end, its peak the run's.
  const SvgChart& queue = charts.at("queue_length.svg");
  ASSERT_EQ(queue.lines.size(), 1u);
  EXPECT_EQ(queue.lines[0].y.size(), 2 * static_cast<size_t>(run.result.requests));
  EXPECT_EQ(queue.lines[0].y.back(), 0.0);
  EXPECT_GE(*std::min_element(queue.lines[0].y.begin(), queue.lines[0].y.end()), 0.0);
  const SvgChart& padding = charts.at("cp_padding.svg");
  double counted = 0;
  for (double v : padding.bars[0].values) counted += v;
  EXPECT_EQ(counted, static_cast<double>(run.result.batches));
  EXPECT_EQ(padding.note, "");
}

TEST(PlotsTest, WithoutCpThePaddingPlotSaysSo) {
  const Recorded run = RunRecorded(Conversations(8), SmallConfig(4, /*cp=*/1));
  const SvgChart padding = Charts(run.record).at("cp_padding.svg");
  EXPECT_NE(padding.note.find("cp=1"), std::string::npos);
  EXPECT_NE(RenderSvg(padding).find("cp=1: no CP split plans"), std::string::npos);
}

TEST(PlotsTest, ManyRanksDrawABandAndAFewRanks) {
  const Recorded run = RunRecorded(Conversations(24), SmallConfig(40));
  const SvgChart pages = Charts(run.record).at("pages_in_use.svg");
  EXPECT_EQ(pages.lines.size(), 5u);  // ranks 0..3 and the mean over all 40
  EXPECT_NE(pages.bands[0].name.find("all 40 ranks"), std::string::npos);
}

TEST(PlotsTest, LongRunsAreDecimated) {
  SimRecord rec;
  rec.shard_size = rec.ranks_recorded = 2;
  rec.has_block_ids = true;
  for (int i = 0; i < 9000; ++i) {
    BatchRow b;
    b.batch_id = i;
    b.start_us = i * 10.0;
    b.end_us = b.start_us + 5;
    b.gathered_bytes_layer = (i * 7919) % 100000;
    b.pages_in_use_min = i % 50, b.pages_in_use_max = i % 50 + 3, b.pages_in_use_mean = i % 50 + 1.5;
    b.matched_prompt_tokens = i + 1, b.cached_tokens = i / 2;
    rec.batches.push_back(b);
    rec.rank_pages.push_back(i % 50);
    rec.rank_pages.push_back(i % 50 + 3);
  }
  for (const Plot& p : BuildPlots(rec)) {
    const std::string svg = RenderSvg(p.chart);
    EXPECT_EQ(CheckXml(svg).error, "") << p.file;
    EXPECT_LE(MaxPolylinePoints(svg), kMaxSeriesPoints) << p.file;
    EXPECT_LT(svg.size(), 400u * 1024) << p.file;
  }
}

}  // namespace
}  // namespace kvshard::sim
