// Phase times from work and rates; the layer loop overlaps layer l's compute with layer l+1's gather.
#include "sim/cost_model.h"

#include <algorithm>

namespace kvshard::sim {
namespace {

double Fit(const std::optional<LinearTime>& fit, double x, double physical) {
  if (x <= 0) return 0;
  return fit ? std::max(0.0, fit->At(x)) : physical;
}

}  // namespace

BatchTime CostModel::Predict(const BatchWork& w, int64_t shard_size, int64_t cp_size) const {
  BatchTime t;
  const double n = static_cast<double>(shard_size);
  const double prefix_pages = static_cast<double>(w.prefix_pages);
  t.plan_us = Fit(plan_fit, prefix_pages, plan_latency_us + plan_us_per_page * prefix_pages);
  if (plan_fit && prefix_pages <= 0) t.plan_us = std::max(0.0, plan_fit->latency_us);
  // Per layer: pack this rank's send block (1/N of the output), then all-gather it over NVLink.
  const double gathered = static_cast<double>(w.gathered_bytes_layer);
  const double block = gathered / n;
  const double pack_layer = Fit(pack_fit, block, block * 2 / hbm_bytes_per_us);
  const double allgather_layer =
      shard_size > 1 && gathered > 0 ? collective_latency_us + gathered * (n - 1) / n / nvlink_bytes_per_us : 0.0;
  const double gather_layer = pack_layer + allgather_layer;
  const double staged = static_cast<double>(w.staged_bytes_layer);
  const double stage_layer = Fit(stage_fit, staged, staged * 2 / hbm_bytes_per_us);
  const double reranged = static_cast<double>(w.rerange_bytes_layer);
  const double rerange_layer = Fit(rerange_fit, reranged, reranged * 2 / hbm_bytes_per_us);
  // The shard group's N ranks split the model's FLOPs (tensor parallel); CP splits the batch's tokens further.
  const double ranks = n * static_cast<double>(cp_size);
  const double dense_flops = static_cast<double>(w.compute_tokens) * flops_per_token_layer / ranks;
  const double attention_flops = static_cast<double>(w.attention_pairs) * attention_flops_per_pair_layer / ranks;
  const double compute_layer = Fit(dense_fit, dense_flops, dense_flops / flops_per_us) +
                               Fit(attention_fit, attention_flops, attention_flops / flops_per_us);
  const double l = static_cast<double>(layers);
  t.pack_us = pack_layer * l;
  t.allgather_us = allgather_layer * l;
  t.gather_us = gather_layer * l;
  t.stage_us = stage_layer * l;
  t.compute_us = compute_layer * l;
  t.rerange_us = rerange_layer * l;
  // Layer 0's gather is exposed; afterwards each layer waits for the slower of its compute and the next gather.
  t.total_us = t.plan_us + gather_layer + (std::max(compute_layer, gather_layer) + stage_layer + rerange_layer) * l;
  return t;
}

}  // namespace kvshard::sim
