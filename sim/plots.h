// kvshard simulate --plots: a run's record as six SVG charts (pages in use per rank, cumulative prefix hit rate,
// gathered bytes per batch, CP padding histogram, TTFT CDF, requests waiting) a user opens in a browser.
#ifndef KVSHARD_SIM_PLOTS_H_
#define KVSHARD_SIM_PLOTS_H_

#include <string>
#include <vector>

#include "sim/record.h"
#include "sim/svg_chart.h"

namespace kvshard::sim {

// One plot file: its name in the --plots directory and its chart.
struct Plot {
  std::string file;
  SvgChart chart;
};

// The six charts of `record`: pages_in_use.svg, prefix_hit_rate.svg, gathered_bytes.svg, cp_padding.svg,
// ttft_cdf.svg, queue_length.svg.
std::vector<Plot> BuildPlots(const SimRecord& record);

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_PLOTS_H_
