// SVG chart rendering: data mapped into a fixed plot area, clipped to it; ticks at 1-2-5 steps; the legend in
// the plot corner that covers the fewest data points.
#include "sim/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <sstream>
#include <utility>

namespace kvshard::sim {
namespace {

constexpr double kLeft = 90, kRight = 30, kTop = 80, kBottom = 70;

std::string Fmt(double v) {  // an SVG coordinate
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

// Data range of the chart's x (or y) values; nullopt when there are none.
struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void Add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

double TickStep(double lo, double hi, int target) {
  double span = hi - lo;
  if (!(span > 0)) span = std::max(1.0, std::fabs(hi));
  const double raw = span / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw * (1 - 1e-9)) return m * mag;
  }
  return 10 * mag;
}

// The axis ends: fixed ones as given, others from the data rounded out to a tick step.
void AxisEnds(Range data, std::optional<double> fixed_lo, std::optional<double> fixed_hi, bool from_zero, double* lo,
              double* hi) {
  if (data.empty()) data.lo = 0, data.hi = 1;
  if (from_zero && data.lo >= 0) data.lo = 0;
  if (data.hi <= data.lo) data.hi = data.lo + (data.lo == 0 ? 1 : std::fabs(data.lo));
  if (from_zero) data.hi += 0.04 * (data.hi - data.lo);  // headroom above the highest value
  const double step = TickStep(data.lo, data.hi, 6);
  *lo = fixed_lo ? *fixed_lo : std::floor(data.lo / step + 1e-9) * step;
  *hi = fixed_hi ? *fixed_hi : std::ceil(data.hi / step - 1e-9) * step;
  if (*hi <= *lo) *hi = *lo + step;
}

// A drawn piece of data on screen (a line segment; a point when both ends agree).
struct Segment {
  double x0, y0, x1, y1;
};

// Whether segment `g` meets the box [bx, bx + bw] x [by, by + bh] (Liang-Barsky clipping).
bool Meets(const Segment& g, double bx, double by, double bw, double bh) {
  double t0 = 0, t1 = 1;
  const double dx = g.x1 - g.x0, dy = g.y1 - g.y0;
  const double p[4] = {-dx, dx, -dy, dy};
  const double q[4] = {g.x0 - bx, bx + bw - g.x0, g.y0 - by, by + bh - g.y0};
  for (int i = 0; i < 4; ++i) {
    if (p[i] == 0) {
      if (q[i] < 0) return false;
      continue;
    }
    const double t = q[i] / p[i];
    if (p[i] < 0) {
      t0 = std::max(t0, t);
    } else {
      t1 = std::min(t1, t);
    }
    if (t0 > t1) return false;
  }
  return true;
}

}  // namespace

std::string XmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!std::isfinite(lo) || !std::isfinite(hi) || hi < lo) return ticks;
  const double step = TickStep(lo, hi, target);
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
    if (ticks.size() > 100) break;
  }
  return ticks;
}

std::string TickLabel(double v) {
  char buf[32];
  const double a = std::fabs(v);
  if (a >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%.3gG", v / 1e9);
  } else if (a >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%.3gM", v / 1e6);
  } else if (a >= 1e4) {
    std::snprintf(buf, sizeof(buf), "%.3gk", v / 1e3);
  } else if (v == std::round(v)) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3g", v);
  }
  return buf;
}

void Decimate(const std::vector<double>& x, const std::vector<double>& y, size_t max_points, std::vector<double>* out_x,
              std::vector<double>* out_y) {
  const size_t n = std::min(x.size(), y.size());
  out_x->clear();
  out_y->clear();
  if (n <= max_points || max_points < 2) {
    out_x->assign(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n));
    out_y->assign(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(n));
    return;
  }
  const size_t buckets = max_points / 2;
  for (size_t k = 0; k < buckets; ++k) {
    const size_t a = k * n / buckets, b = (k + 1) * n / buckets;
    if (a >= b) continue;
    size_t lo = a, hi = a;
    for (size_t i = a; i < b; ++i) {
      if (y[i] < y[lo]) lo = i;
      if (y[i] > y[hi]) hi = i;
    }
    out_x->push_back(x[std::min(lo, hi)]);
    out_y->push_back(y[std::min(lo, hi)]);
    if (lo != hi) {
      out_x->push_back(x[std::max(lo, hi)]);
      out_y->push_back(y[std::max(lo, hi)]);
    }
  }
}

SvgBand DecimateBand(const SvgBand& band, size_t max_points) {
  const size_t n = std::min({band.x.size(), band.lo.size(), band.hi.size()});
  if (n <= max_points || max_points < 1) return band;
  SvgBand out{band.name, band.color, {}, {}, {}};
  for (size_t k = 0; k < max_points; ++k) {
    const size_t a = k * n / max_points, b = (k + 1) * n / max_points;
    if (a >= b) continue;
    out.x.push_back(band.x[a]);
    out.lo.push_back(*std::min_element(band.lo.begin() + a, band.lo.begin() + b));
    out.hi.push_back(*std::max_element(band.hi.begin() + a, band.hi.begin() + b));
  }
  return out;
}

std::string RenderSvg(const SvgChart& c) {
  Range xr, yr;
  for (const SvgLine& l : c.lines) {
    for (double v : l.x) xr.Add(v);
    for (double v : l.y) yr.Add(v);
  }
  for (const SvgBand& b : c.bands) {
    for (double v : b.x) xr.Add(v);
    for (double v : b.lo) yr.Add(v);
    for (double v : b.hi) yr.Add(v);
  }
  for (const SvgBars& b : c.bars) {
    for (double v : b.edges) xr.Add(v);
    for (double v : b.values) yr.Add(v);
  }
  double x0, x1, y0, y1;
  AxisEnds(xr, c.x_min, c.x_max, /*from_zero=*/false, &x0, &x1);
  AxisEnds(yr, c.y_min, c.y_max, /*from_zero=*/true, &y0, &y1);
  const double W = c.width, H = c.height, px0 = kLeft, px1 = W - kRight, py0 = kTop, py1 = H - kBottom;
  auto X = [&](double v) { return px0 + (v - x0) / (x1 - x0) * (px1 - px0); };
  auto Y = [&](double v) { return py1 - (v - y0) / (y1 - y0) * (py1 - py0); };

  std::ostringstream s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << c.width << "\" height=\"" << c.height
    << "\" viewBox=\"0 0 " << c.width << ' ' << c.height << "\" font-family=\"sans-serif\">\n"
    << "<title>" << XmlEscape(c.title) << "</title>\n"
    << "<defs><clipPath id=\"plot-area\"><rect x=\"" << Fmt(px0) << "\" y=\"" << Fmt(py0) << "\" width=\""
    << Fmt(px1 - px0) << "\" height=\"" << Fmt(py1 - py0) << "\"/></clipPath></defs>\n"
    << "<rect x=\"0\" y=\"0\" width=\"" << c.width << "\" height=\"" << c.height << "\" fill=\"white\"/>\n"
    << "<text x=\"" << Fmt(W / 2) << "\" y=\"30\" text-anchor=\"middle\" font-size=\"20\" font-weight=\"bold\">"
    << XmlEscape(c.title) << "</text>\n";
  if (!c.subtitle.empty()) {
    s << "<text x=\"" << Fmt(W / 2) << "\" y=\"54\" text-anchor=\"middle\" font-size=\"13\" fill=\"#555\">"
      << XmlEscape(c.subtitle) << "</text>\n";
  }
  // Grid, ticks and tick labels.
  s << "<g font-size=\"12\" fill=\"#333\">\n";
  for (double t : NiceTicks(x0, x1, 8)) {
    s << "<line x1=\"" << Fmt(X(t)) << "\" y1=\"" << Fmt(py0) << "\" x2=\"" << Fmt(X(t)) << "\" y2=\"" << Fmt(py1 + 5)
      << "\" stroke=\"#e3e3e3\"/><text x=\"" << Fmt(X(t)) << "\" y=\"" << Fmt(py1 + 20) << "\" text-anchor=\"middle\">"
      << TickLabel(t) << "</text>\n";
  }
  for (double t : NiceTicks(y0, y1, 6)) {
    s << "<line x1=\"" << Fmt(px0 - 5) << "\" y1=\"" << Fmt(Y(t)) << "\" x2=\"" << Fmt(px1) << "\" y2=\"" << Fmt(Y(t))
      << "\" stroke=\"#e3e3e3\"/><text x=\"" << Fmt(px0 - 9) << "\" y=\"" << Fmt(Y(t) + 4) << "\" text-anchor=\"end\">"
      << TickLabel(t) << "</text>\n";
  }
  s << "</g>\n";
  s << "<rect x=\"" << Fmt(px0) << "\" y=\"" << Fmt(py0) << "\" width=\"" << Fmt(px1 - px0) << "\" height=\""
    << Fmt(py1 - py0) << "\" fill=\"none\" stroke=\"#333\"/>\n";
  s << "<text x=\"" << Fmt((px0 + px1) / 2) << "\" y=\"" << Fmt(H - 22) << "\" text-anchor=\"middle\" "
    << "font-size=\"14\">" << XmlEscape(c.x_label) << "</text>\n";
  s << "<text x=\"22\" y=\"" << Fmt((py0 + py1) / 2) << "\" text-anchor=\"middle\" font-size=\"14\" "
    << "transform=\"rotate(-90 22 " << Fmt((py0 + py1) / 2) << ")\">" << XmlEscape(c.y_label) << "</text>\n";
  // The data, clipped to the plot area: bands under bars under lines.
  std::vector<Segment> drawn;  // the data on screen, for placing the legend
  s << "<g clip-path=\"url(#plot-area)\">\n";
  for (const SvgBand& raw : c.bands) {
    const SvgBand b = DecimateBand(raw, kMaxSeriesPoints);
    s << "<polygon fill=\"" << XmlEscape(b.color) << "\" fill-opacity=\"0.22\" stroke=\"none\" points=\"";
    for (size_t i = 0; i < b.x.size(); ++i) {
      s << Fmt(X(b.x[i])) << ',' << Fmt(Y(b.hi[i])) << ' ';
      drawn.push_back({X(b.x[i]), Y(b.lo[i]), X(b.x[i]), Y(b.hi[i])});
    }
    for (size_t i = b.x.size(); i-- > 0;) s << Fmt(X(b.x[i])) << ',' << Fmt(Y(b.lo[i])) << ' ';
    s << "\"/>\n";
  }
  for (const SvgBars& b : c.bars) {
    s << "<path fill=\"" << XmlEscape(b.color) << "\" stroke=\"white\" stroke-width=\"0.5\" d=\"";
    for (size_t i = 0; i + 1 < b.edges.size() && i < b.values.size(); ++i) {
      if (b.values[i] <= 0) continue;
      s << 'M' << Fmt(X(b.edges[i])) << ' ' << Fmt(Y(0)) << 'V' << Fmt(Y(b.values[i])) << 'H' << Fmt(X(b.edges[i + 1]))
        << 'V' << Fmt(Y(0)) << 'Z';
      for (double e : {b.edges[i], b.edges[i + 1]}) drawn.push_back({X(e), Y(0), X(e), Y(b.values[i])});
      drawn.push_back({X(b.edges[i]), Y(b.values[i]), X(b.edges[i + 1]), Y(b.values[i])});
    }
    s << "\"/>\n";
    // Each bar's count above it, so small bars stay readable.
    s << "<g font-size=\"10\" fill=\"#333\" text-anchor=\"middle\">";
    for (size_t i = 0; i + 1 < b.edges.size() && i < b.values.size(); ++i) {
      if (b.values[i] <= 0) continue;
      s << "<text x=\"" << Fmt(X((b.edges[i] + b.edges[i + 1]) / 2)) << "\" y=\"" << Fmt(Y(b.values[i]) - 3) << "\">"
        << TickLabel(b.values[i]) << "</text>";
    }
    s << "</g>\n";
  }
  for (const SvgLine& l : c.lines) {
    std::vector<double> dx, dy;
    Decimate(l.x, l.y, kMaxSeriesPoints, &dx, &dy);
    s << "<polyline fill=\"none\" stroke=\"" << XmlEscape(l.color) << "\" stroke-width=\"1.5\""
      << (l.dashed ? " stroke-dasharray=\"6 4\"" : "") << " points=\"";
    for (size_t i = 0; i < dx.size(); ++i) {
      s << Fmt(X(dx[i])) << ',' << Fmt(Y(dy[i])) << ' ';
      if (i > 0) drawn.push_back({X(dx[i - 1]), Y(dy[i - 1]), X(dx[i]), Y(dy[i])});
    }
    s << "\"/>\n";
  }
  s << "</g>\n";
  if (!c.note.empty()) {
    s << "<text x=\"" << Fmt((px0 + px1) / 2) << "\" y=\"" << Fmt((py0 + py1) / 2) << "\" text-anchor=\"middle\" "
      << "font-size=\"16\" fill=\"#666\">" << XmlEscape(c.note) << "</text>\n";
  }
  // The legend: one entry per band, bar series and line.
  struct Entry {
    std::string name, color;
    char kind;
    bool dashed;
  };
  std::vector<Entry> entries;
  for (const SvgBand& b : c.bands) entries.push_back({b.name, b.color, 'b', false});
  for (const SvgBars& b : c.bars) entries.push_back({b.name, b.color, 'r', false});
  for (const SvgLine& l : c.lines) entries.push_back({l.name, l.color, 'l', l.dashed});
  if (!entries.empty()) {
    size_t longest = 0;
    for (const Entry& e : entries) longest = std::max(longest, e.name.size());
    const double lw = 44 + 7.0 * static_cast<double>(longest), lh = 10 + 18.0 * entries.size();
    // The corner (top-left, top-right, bottom-right, bottom-left) whose box meets the fewest data segments.
    double lx = px0 + 10, ly = py0 + 10;
    size_t best = SIZE_MAX;
    for (const auto& [cx, cy] : {std::pair{px0 + 10, py0 + 10},
                                 {px1 - 10 - lw, py0 + 10},
                                 {px1 - 10 - lw, py1 - 10 - lh},
                                 {px0 + 10, py1 - 10 - lh}}) {
      size_t covered = 0;
      for (const Segment& g : drawn) covered += Meets(g, cx, cy, lw, lh);
      if (covered < best) best = covered, lx = cx, ly = cy;
    }
    s << "<g font-size=\"12\">\n<rect x=\"" << Fmt(lx) << "\" y=\"" << Fmt(ly) << "\" width=\"" << Fmt(lw)
      << "\" height=\"" << Fmt(lh) << "\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#bbb\"/>\n";
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      const double ey = ly + 14 + 18.0 * i;
      if (e.kind == 'l') {
        s << "<line x1=\"" << Fmt(lx + 8) << "\" y1=\"" << Fmt(ey) << "\" x2=\"" << Fmt(lx + 30) << "\" y2=\""
          << Fmt(ey) << "\" stroke=\"" << XmlEscape(e.color) << "\" stroke-width=\"2\""
          << (e.dashed ? " stroke-dasharray=\"6 4\"" : "") << "/>";
      } else {
        s << "<rect x=\"" << Fmt(lx + 8) << "\" y=\"" << Fmt(ey - 6) << "\" width=\"22\" height=\"12\" fill=\""
          << XmlEscape(e.color) << "\"" << (e.kind == 'b' ? " fill-opacity=\"0.22\"" : "") << "/>";
      }
      s << "<text x=\"" << Fmt(lx + 36) << "\" y=\"" << Fmt(ey + 4) << "\">" << XmlEscape(e.name) << "</text>\n";
    }
    s << "</g>\n";
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace kvshard::sim
