// The SVG renderer: well-formed documents (root <svg> with width and height, one polyline per line series,
// one polygon per band, one path per bar series), escaped text, decimation and tick choice.
#include "sim/svg_chart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "sim/output_test_util.h"

namespace kvshard::sim {
namespace {

TEST(SvgChartTest, WellFormedWithOneElementPerSeries) {
  SvgChart c;
  c.title = "pages <per> rank & \"more\"";
  c.x_label = "time (s)";
  c.y_label = "pages";
  c.lines.push_back({"a", "#123456", {0, 1, 2}, {3, 1, 4}, false});
  c.lines.push_back({"b & c", "#654321", {0, 1, 2}, {1, 5, 9}, true});
  c.bands.push_back({"band", "#999999", {0, 1, 2}, {0, 1, 1}, {4, 5, 9}});
  c.bars.push_back({"bars", "#00aa00", {0, 0.5, 1}, {2, 3}});
  c.note = "a note";
  const std::string svg = RenderSvg(c);
  const XmlShape shape = CheckXml(svg);
  ASSERT_EQ(shape.error, "") << svg;
  EXPECT_EQ(shape.root, "svg");
  EXPECT_EQ(shape.root_attrs.at("width"), "960");
  EXPECT_EQ(shape.root_attrs.at("height"), "540");
  EXPECT_EQ(shape.root_attrs.at("xmlns"), "http://www.w3.org/2000/svg");
  EXPECT_EQ(shape.counts.at("polyline"), 2);
  EXPECT_EQ(shape.counts.at("polygon"), 1);
  EXPECT_EQ(shape.counts.at("path"), 1);
  EXPECT_NE(svg.find("pages &lt;per&gt; rank &amp; &quot;more&quot;"), std::string::npos);
  EXPECT_NE(svg.find(">b &amp; c</text>"), std::string::npos);  // legend entry
  EXPECT_NE(svg.find(">a note</text>"), std::string::npos);
  EXPECT_NE(svg.find(">time (s)</text>"), std::string::npos);
}

// The x of the legend's box.
double LegendX(const std::string& svg) {
  const size_t at = svg.rfind("<rect x=\"", svg.find("fill-opacity=\"0.85\""));
  return std::stod(svg.substr(at + 9));
}

TEST(SvgChartTest, LegendAvoidsTheData) {
  SvgChart c;
  c.y_max = 10;
  c.lines.push_back({"falling", "#000", {0, 1, 2, 3, 4}, {9.5, 9.4, 9.3, 0.2, 0.1}, false});
  EXPECT_GT(LegendX(RenderSvg(c)), 400);  // top-left is covered: the legend goes right
  c.lines[0].y = {0.1, 0.2, 0.3, 9.4, 9.5};
  EXPECT_LT(LegendX(RenderSvg(c)), 200);  // rising data: top-left is free
}

TEST(SvgChartTest, EmptyChartIsStillAnSvg) {
  const XmlShape shape = CheckXml(RenderSvg(SvgChart{}));
  EXPECT_EQ(shape.error, "");
  EXPECT_EQ(shape.root, "svg");
}

TEST(SvgChartTest, CheckXmlRejectsBrokenDocuments) {
  EXPECT_NE(CheckXml("<svg><g></svg>").error, "");
  EXPECT_NE(CheckXml("<svg a=\"1\">x & y</svg>").error, "");
  EXPECT_NE(CheckXml("<svg></svg><svg></svg>").error, "");
  EXPECT_EQ(CheckXml("<svg a=\"1\"><g/>&amp;</svg>").error, "");
}

TEST(SvgChartTest, DecimationBoundsPointsAndKeepsExtremes) {
  std::vector<double> x, y;
  for (int i = 0; i < 10007; ++i) {
    x.push_back(i * 0.5);
    y.push_back(std::sin(i * 0.01) * 100 + (i == 4321 ? 1000 : 0) - (i == 9000 ? 500 : 0));
  }
  std::vector<double> dx, dy;
  Decimate(x, y, kMaxSeriesPoints, &dx, &dy);
  EXPECT_LE(dx.size(), kMaxSeriesPoints);
  EXPECT_GT(dx.size(), kMaxSeriesPoints / 2);
  EXPECT_TRUE(std::is_sorted(dx.begin(), dx.end()));
  EXPECT_EQ(*std::max_element(dy.begin(), dy.end()), *std::max_element(y.begin(), y.end()));
  EXPECT_EQ(*std::min_element(dy.begin(), dy.end()), *std::min_element(y.begin(), y.end()));
  Decimate({1, 2}, {3, 4}, kMaxSeriesPoints, &dx, &dy);
  EXPECT_EQ(dy, (std::vector<double>{3, 4}));
  SvgBand band{"b", "#000", x, y, y};
  const SvgBand d = DecimateBand(band, 500);
  EXPECT_EQ(d.x.size(), 500u);
  EXPECT_EQ(*std::max_element(d.hi.begin(), d.hi.end()), *std::max_element(y.begin(), y.end()));
}

TEST(SvgChartTest, TicksAreNiceAndCoverTheRange) {
  for (auto [lo, hi] : {std::pair{0.0, 97.0}, {0.0, 1.0}, {3.0, 3.5}, {0.0, 6811.0}, {-20.0, 1e9}}) {
    const std::vector<double> t = NiceTicks(lo, hi, 6);
    ASSERT_GE(t.size(), 3u) << lo << " " << hi;
    EXPECT_LE(t.size(), 13u);
    const double step = t[1] - t[0];
    const double mant = step / std::pow(10.0, std::floor(std::log10(step)));
    EXPECT_TRUE(std::fabs(mant - 1) < 1e-6 || std::fabs(mant - 2) < 1e-6 || std::fabs(mant - 5) < 1e-6) << step;
    for (size_t i = 0; i < t.size(); ++i) {
      EXPECT_GE(t[i], lo - 1e-9);
      EXPECT_LE(t[i], hi + 1e-9);
      if (i > 0) {
        EXPECT_NEAR(t[i] - t[i - 1], step, step * 1e-6);
      }
    }
  }
  EXPECT_EQ(TickLabel(1500000), "1.5M");
  EXPECT_EQ(TickLabel(20000), "20k");
  EXPECT_EQ(TickLabel(0.25), "0.25");
  EXPECT_EQ(TickLabel(3), "3");
  EXPECT_EQ(TickLabel(2e9), "2G");
}

}  // namespace
}  // namespace kvshard::sim
