// Phase times from work and rates; the layer loop overlaps layer l's compute with layer l+1's gather.
#include "sim/cost_model.h"

#include <algorithm>

namespace kvshard::sim {

BatchTime CostModel::Predict(const BatchWork& w, int64_t shard_size, int64_t cp_size) const {
  BatchTime t;
  t.plan_us = plan_latency_us + plan_us_per_page * static_cast<double>(w.prefix_pages);
  const double gather_layer =
      w.gathered_bytes_layer == 0
          ? 0.0
          : collective_latency_us + static_cast<double>(w.gathered_bytes_layer) * (shard_size - 1) / shard_size /
                                        nvlink_bytes_per_us;
  const double stage_layer = static_cast<double>(w.staged_bytes_layer) * 2 / hbm_bytes_per_us;
  const double rerange_layer = static_cast<double>(w.rerange_bytes_layer) * 2 / hbm_bytes_per_us;
  // The shard group's N ranks split the model's FLOPs (tensor parallel); CP splits the batch's tokens further.
  const double ranks = static_cast<double>(shard_size) * static_cast<double>(cp_size);
  const double flops = (static_cast<double>(w.compute_tokens) * flops_per_token_layer +
                        static_cast<double>(w.context_tokens) * attention_flops_per_context_token_layer) /
                       ranks;
  const double compute_layer = flops / flops_per_us;
  t.gather_us = gather_layer * layers;
  t.stage_us = stage_layer * layers;
  t.compute_us = compute_layer * layers;
  t.rerange_us = rerange_layer * layers;
  // Layer 0's gather is exposed; afterwards each layer waits for the slower of its compute and the next gather.
  t.total_us = t.plan_us + gather_layer + (std::max(compute_layer, gather_layer) + stage_layer + rerange_layer) * layers;
  return t;
}

}  // namespace kvshard::sim
