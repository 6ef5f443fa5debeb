// A small hand-written SVG chart renderer for kvshard simulate --plots: line series, min-max bands and
// histogram bars on linear axes with "nice" ticks, a title, axis labels and a legend; no external library.
#ifndef KVSHARD_SIM_SVG_CHART_H_
#define KVSHARD_SIM_SVG_CHART_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace kvshard::sim {

// The most points one series keeps (longer series are decimated, keeping each bucket's min and max).
inline constexpr size_t kMaxSeriesPoints = 2000;

// One line (an SVG polyline).
struct SvgLine {
  std::string name, color;
  std::vector<double> x, y;
  bool dashed = false;
};

// A shaded band between lo and hi (an SVG polygon), e.g. the min..max over ranks.
struct SvgBand {
  std::string name, color;
  std::vector<double> x, lo, hi;
};

// Histogram bars: bin i spans [edges[i], edges[i + 1]) with height values[i] (one SVG path).
struct SvgBars {
  std::string name, color;
  std::vector<double> edges, values;
};

// A chart: what to draw and how to label it.
struct SvgChart {
  std::string title, subtitle, x_label, y_label;
  std::vector<SvgBand> bands;
  std::vector<SvgLine> lines;
  std::vector<SvgBars> bars;
  std::string note;                                  // a line of text centred in the plot area (e.g. why it is empty)
  std::optional<double> x_min, x_max, y_min, y_max;  // fixed axis ends; otherwise from the data (y from 0)
  int width = 960, height = 540;
};

// The chart as a standalone SVG document.
std::string RenderSvg(const SvgChart& chart);

// Min-max decimation: at most `max_points` points (>= 2) of (x, y), x non-decreasing; each of max_points / 2
// index buckets keeps its smallest and largest y in x order. Shorter series are returned unchanged.
void Decimate(const std::vector<double>& x, const std::vector<double>& y, size_t max_points, std::vector<double>* out_x,
              std::vector<double>* out_y);

// A band decimated to at most `max_points` points: each bucket keeps its first x, the min of lo, the max of hi.
SvgBand DecimateBand(const SvgBand& band, size_t max_points);

// Tick positions covering [lo, hi] at a 1-2-5 step, about `target` of them.
std::vector<double> NiceTicks(double lo, double hi, int target);

// A tick label: integers plainly, large values with k/M/G, fractions to 3 significant digits.
std::string TickLabel(double v);

// Text escaped for SVG/XML content and attributes.
std::string XmlEscape(const std::string& text);

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_SVG_CHART_H_
