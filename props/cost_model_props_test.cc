// The cost model's structure (sim/cost_model.h, docs/simulate.md "The cost model"), as properties rather than
// golden numbers: a batch's time is affine in the number of layers — the plan and one exposed layer of gather,
// then per layer the slower of compute and the next gather plus staging and rerange; each phase follows its
// documented formula in bytes, FLOPs and rates (or, fitted, its fit at the documented x); and the units are
// consistent: scaling bytes and byte rates together, or FLOPs and FLOP rates together, changes no time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "props/property.h"
#include "sim/cost_model.h"

namespace kvshard::props {
namespace {

// Work of one batch, zeros included (a batch without prefix, N = 1 without gather, no CP rerange).
sim::BatchWork DrawWork() {
  sim::BatchWork w;
  const auto maybe = [](int64_t hi) { return *rc::gen::element(0, 1, 2) == 0 ? 0 : *rc::gen::inRange<int64_t>(1, hi); };
  w.requests = *rc::gen::inRange<int64_t>(1, 64);
  w.extend_tokens = *rc::gen::inRange<int64_t>(1, 1 << 16);
  w.compute_tokens = w.extend_tokens + maybe(4096);
  w.context_tokens = w.extend_tokens + maybe(1 << 20);
  w.attention_pairs = maybe(int64_t{1} << 36);
  w.prefix_pages = maybe(1 << 16);
  w.gathered_bytes_layer = maybe(int64_t{1} << 32);
  w.staged_bytes_layer = maybe(int64_t{1} << 28);
  w.rerange_bytes_layer = maybe(int64_t{1} << 28);
  return w;
}

std::optional<sim::LinearTime> DrawFit() {
  if (*rc::gen::arbitrary<bool>()) return std::nullopt;
  sim::LinearTime f;
  f.latency_us = *rc::gen::element(0.0, 3.5, 40.0, -5.0);  // a negative latency: the time is clamped at 0
  f.us_per_unit = *rc::gen::element(1e-9, 2.5e-7, 1e-3);
  if (*rc::gen::arbitrary<bool>()) {
    f.knee = *rc::gen::element(1e3, 1.6e7, 3.4e10);
    f.us_per_unit_above = *rc::gen::element(1e-9, 5e-7, 2e-3);
  }
  return f;
}

// Rates around the physical defaults, and fits for some phases.
sim::CostModel DrawModel() {
  sim::CostModel m;
  m.layers = *rc::gen::inRange<int64_t>(1, 129);
  m.plan_latency_us = *rc::gen::element(0.0, 5.0, 20.0);
  m.plan_us_per_page = *rc::gen::element(0.0, 0.002, 0.1);
  m.hbm_bytes_per_us = *rc::gen::element(1e5, 4.8e6, 8e6);
  m.nvlink_bytes_per_us = *rc::gen::element(5e4, 450e3, 9e5);
  m.collective_latency_us = *rc::gen::element(0.0, 10.0, 25.0);
  m.flops_per_us = *rc::gen::element(1e8, 989e6 * 0.4, 2e9);
  m.flops_per_token_layer = *rc::gen::element(1e6, 2.0 * 37e9 / 61, 5e9);
  m.attention_flops_per_pair_layer = *rc::gen::element(1e3, 2.0 * 128 * (192 + 128), 1e6);
  if (*rc::gen::arbitrary<bool>()) {
    m.plan_fit = DrawFit();
    m.pack_fit = DrawFit();
    m.stage_fit = DrawFit();
    m.rerange_fit = DrawFit();
    m.dense_fit = DrawFit();
    m.attention_fit = DrawFit();
  }
  return m;
}

bool Near(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max({std::fabs(a), std::fabs(b), 1.0}); }

// A phase's time for `x` of its unit: 0 without work, else the fit (clamped at 0) or the physical formula.
double Phase(const std::optional<sim::LinearTime>& fit, double x, double physical) {
  if (x <= 0) return 0;
  return fit ? std::max(0.0, fit->At(x)) : physical;
}

// Each phase from its documented formula: per layer, pack reads and writes this rank's send block (1/N of the
// gathered bytes) at HBM rate, the all-gather moves (N - 1)/N of its output over NVLink after the collective
// latency (nothing when N = 1), staging and rerange read and write their bytes; compute is the dense FLOPs
// (compute tokens x FLOPs per token) plus the attention FLOPs (pairs x FLOPs per pair), split over N x CP ranks;
// the host plan is latency + pages x cost. Each phase total is its per-layer time x layers.
KVSHARD_PROP(CostModelProps, EveryPhaseFollowsItsFormula, ()) {
  const sim::BatchWork w = DrawWork();
  const sim::CostModel m = DrawModel();
  const int64_t n = *rc::gen::inRange<int64_t>(1, 17), cp = *rc::gen::element<int64_t>(1, 2, 4, 8);
  const sim::BatchTime t = m.Predict(w, n, cp);
  const double layers = static_cast<double>(m.layers), ranks = static_cast<double>(n * cp);
  const double gathered = static_cast<double>(w.gathered_bytes_layer), block = gathered / static_cast<double>(n);
  const double pack = Phase(m.pack_fit, block, 2 * block / m.hbm_bytes_per_us);
  const double allgather =
      n > 1 && gathered > 0 ? m.collective_latency_us + gathered * (n - 1) / n / m.nvlink_bytes_per_us : 0;
  const double staged = static_cast<double>(w.staged_bytes_layer),
               reranged = static_cast<double>(w.rerange_bytes_layer);
  const double dense = static_cast<double>(w.compute_tokens) * m.flops_per_token_layer / ranks;
  const double attention = static_cast<double>(w.attention_pairs) * m.attention_flops_per_pair_layer / ranks;
  const double pages = static_cast<double>(w.prefix_pages);
  double plan = Phase(m.plan_fit, pages, m.plan_latency_us + m.plan_us_per_page * pages);
  if (m.plan_fit && pages == 0) plan = std::max(0.0, m.plan_fit->latency_us);  // a fitted plan always runs
  RC_ASSERT(Near(t.plan_us, plan));
  RC_ASSERT(Near(t.pack_us, pack * layers));
  RC_ASSERT(Near(t.allgather_us, allgather * layers));
  RC_ASSERT(Near(t.gather_us, t.pack_us + t.allgather_us));
  RC_ASSERT(Near(t.stage_us, Phase(m.stage_fit, staged, 2 * staged / m.hbm_bytes_per_us) * layers));
  RC_ASSERT(Near(t.rerange_us, Phase(m.rerange_fit, reranged, 2 * reranged / m.hbm_bytes_per_us) * layers));
  RC_ASSERT(Near(t.compute_us, (Phase(m.dense_fit, dense, dense / m.flops_per_us) +
                                Phase(m.attention_fit, attention, attention / m.flops_per_us)) *
                                   layers));
  RC_CLASSIFY(m.dense_fit.has_value(), "fitted");
  RC_CLASSIFY(n == 1, "N = 1");
}

// total(L) = plan + one layer's gather (exposed before layer 0) + L x (max(compute, gather) + stage + rerange)
// per layer: affine in L, the plan and the exposed gather its intercept, the layer step its slope.
KVSHARD_PROP(CostModelProps, BatchTimeIsAffineInTheLayers, ()) {
  const sim::BatchWork w = DrawWork();
  sim::CostModel m = DrawModel();
  const int64_t n = *rc::gen::inRange<int64_t>(1, 17), cp = *rc::gen::element<int64_t>(1, 2, 4, 8);
  const int64_t l1 = *rc::gen::inRange<int64_t>(1, 64), l2 = l1 + *rc::gen::inRange<int64_t>(1, 64);
  m.layers = 1;
  const sim::BatchTime one = m.Predict(w, n, cp);  // per-layer phase times
  const double step = std::max(one.compute_us, one.gather_us) + one.stage_us + one.rerange_us;
  const double intercept = one.plan_us + one.gather_us;
  for (const int64_t layers : {l1, l2}) {
    m.layers = layers;
    const sim::BatchTime t = m.Predict(w, n, cp);
    const double l = static_cast<double>(layers);
    RC_ASSERT(Near(t.plan_us, one.plan_us));  // the host plan runs once
    RC_ASSERT(Near(t.gather_us, one.gather_us * l));
    RC_ASSERT(Near(t.compute_us, one.compute_us * l));
    RC_ASSERT(Near(t.total_us, intercept + step * l));
  }
  RC_CLASSIFY(one.gather_us > one.compute_us, "gather-bound");
}

// Units: multiplying every byte count and every byte rate by k (or every FLOP count and the FLOP rate by k)
// leaves every time unchanged; doubling the bytes doubles the byte phases' variable part (physical rates).
KVSHARD_PROP(CostModelProps, UnitsAreConsistent, ()) {
  const sim::BatchWork w = DrawWork();
  sim::CostModel m = DrawModel();
  m.plan_fit = m.pack_fit = m.stage_fit = m.rerange_fit = m.dense_fit = m.attention_fit = std::nullopt;
  const int64_t n = *rc::gen::inRange<int64_t>(1, 17), cp = *rc::gen::element<int64_t>(1, 2, 4, 8);
  const double k = *rc::gen::element(0.5, 2.0, 1000.0);
  const sim::BatchTime t = m.Predict(w, n, cp);

  const int64_t kb = *rc::gen::element<int64_t>(2, 3, 1000);  // bytes x kb, byte rates x kb
  sim::BatchWork bytes = w;
  bytes.gathered_bytes_layer *= kb;
  bytes.staged_bytes_layer *= kb;
  bytes.rerange_bytes_layer *= kb;
  sim::CostModel byte_rates = m;
  byte_rates.hbm_bytes_per_us *= static_cast<double>(kb);
  byte_rates.nvlink_bytes_per_us *= static_cast<double>(kb);
  const sim::BatchTime scaled = byte_rates.Predict(bytes, n, cp);
  RC_ASSERT(Near(scaled.pack_us, t.pack_us));
  RC_ASSERT(Near(scaled.allgather_us, t.allgather_us));
  RC_ASSERT(Near(scaled.stage_us, t.stage_us));
  RC_ASSERT(Near(scaled.rerange_us, t.rerange_us));
  RC_ASSERT(Near(scaled.total_us, t.total_us));

  sim::CostModel flop_rates = m;  // FLOPs per token and per pair x k, FLOP rate x k
  flop_rates.flops_per_token_layer *= k;
  flop_rates.attention_flops_per_pair_layer *= k;
  flop_rates.flops_per_us *= k;
  RC_ASSERT(Near(flop_rates.Predict(w, n, cp).compute_us, t.compute_us));

  // Twice the bytes: pack, stage and rerange double; the all-gather's part past its latency doubles.
  sim::BatchWork twice = w;
  twice.gathered_bytes_layer *= 2;
  twice.staged_bytes_layer *= 2;
  twice.rerange_bytes_layer *= 2;
  const sim::BatchTime d = m.Predict(twice, n, cp);
  const double latency = n > 1 && w.gathered_bytes_layer > 0 ? m.collective_latency_us * m.layers : 0;
  RC_ASSERT(Near(d.pack_us, 2 * t.pack_us));
  RC_ASSERT(Near(d.stage_us, 2 * t.stage_us));
  RC_ASSERT(Near(d.rerange_us, 2 * t.rerange_us));
  RC_ASSERT(Near(d.allgather_us - latency, 2 * (t.allgather_us - latency)));
  // Twice the tokens and pairs: compute doubles; twice the ranks (N x CP): it halves.
  sim::BatchWork more = w;
  more.compute_tokens *= 2;
  more.attention_pairs *= 2;
  RC_ASSERT(Near(m.Predict(more, n, cp).compute_us, 2 * t.compute_us));
  RC_ASSERT(Near(m.Predict(w, n, cp * 2).compute_us, t.compute_us / 2));
}

}  // namespace
}  // namespace kvshard::props
