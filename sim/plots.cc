// The six charts, from the per-batch and per-request rows: pages after each batch (at its end time), the
// cumulative hit rate over the requests matched so far, gathered bytes per batch, the per-batch CP padding
// fraction, the time-to-first-token CDF and the number of requests waiting over time.
#include "sim/plots.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/status.h"

namespace kvshard::sim {
namespace {

const char* const kPalette[] = {"#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#65a30d"};
constexpr int64_t kMaxRankLines = 8;  // per-rank lines drawn: all ranks up to 8, else ranks 0..3
constexpr int kPaddingBins = 20;

std::string Config(const SimRecord& r) {
  return StrCat("N=", r.shard_size, " ps=", r.page_size, " cp=", r.cp_size, ", ", r.batches.size(), " batches");
}

SvgChart PagesInUse(const SimRecord& r) {
  SvgChart c;
  c.title = "KV pages in use per rank";
  c.subtitle = StrCat(Config(r), "; pool ", r.pool_pages_per_rank, " pages per rank; sampled after every batch");
  c.x_label = "simulated time (s)";
  c.y_label = "pages in use";
  SvgBand band{StrCat("min-max over all ", r.shard_size, " ranks"), "#64748b", {}, {}, {}};
  SvgLine mean{"mean over ranks", "#111827", {}, {}, true};
  for (const BatchRow& b : r.batches) {
    band.x.push_back(b.end_us / 1e6);
    band.lo.push_back(static_cast<double>(b.pages_in_use_min));
    band.hi.push_back(static_cast<double>(b.pages_in_use_max));
    mean.x.push_back(b.end_us / 1e6);
    mean.y.push_back(b.pages_in_use_mean);
  }
  c.bands.push_back(std::move(band));
  const int64_t lines = r.shard_size <= kMaxRankLines ? r.ranks_recorded : std::min<int64_t>(4, r.ranks_recorded);
  const size_t rows = r.ranks_recorded ? r.rank_pages.size() / static_cast<size_t>(r.ranks_recorded) : 0;
  for (int64_t k = 0; k < lines; ++k) {
    SvgLine l{StrCat("rank ", k), kPalette[k % 8], {}, {}, false};
    for (size_t i = 0; i < std::min(rows, r.batches.size()); ++i) {
      l.x.push_back(r.batches[i].end_us / 1e6);
      l.y.push_back(static_cast<double>(r.RankPages(i, k)));
    }
    c.lines.push_back(std::move(l));
  }
  c.lines.push_back(std::move(mean));
  return c;
}

SvgChart HitRate(const SimRecord& r) {
  SvgChart c;
  c.title = "Prefix cache hit rate (cumulative)";
  c.subtitle = StrCat(Config(r), "; over the requests matched so far");
  c.x_label = "simulated time (s)";
  c.y_label = "hit rate";
  c.y_min = 0;
  c.y_max = 1;
  SvgLine tokens{"prompt tokens served from the cache", kPalette[0], {}, {}, false};
  SvgLine blocks{"hash blocks found cached", kPalette[1], {}, {}, true};
  for (const BatchRow& b : r.batches) {
    tokens.x.push_back(b.end_us / 1e6);
    tokens.y.push_back(b.matched_prompt_tokens ? static_cast<double>(b.cached_tokens) / b.matched_prompt_tokens : 0);
    blocks.x.push_back(b.end_us / 1e6);
    blocks.y.push_back(b.matched_hash_blocks ? static_cast<double>(b.hit_blocks) / b.matched_hash_blocks : 0);
  }
  c.lines.push_back(std::move(tokens));
  if (r.has_block_ids) {
    c.lines.push_back(std::move(blocks));
  } else {
    c.note = "this workload has no prefix block ids: no prompt shares a page, the hit rate is 0";
  }
  return c;
}

SvgChart GatheredBytes(const SimRecord& r) {
  SvgChart c;
  c.title = "Layer-ahead all-gather output per batch";
  c.subtitle = StrCat(Config(r), "; per rank and layer (N x block pages x ps x KV row bytes)");
  c.x_label = "batch";
  c.y_label = "gathered MiB per layer";
  SvgLine l{"per batch (longer runs: each bucket's min and max)", kPalette[0], {}, {}, false};
  for (const BatchRow& b : r.batches) {
    l.x.push_back(static_cast<double>(b.batch_id));
    l.y.push_back(static_cast<double>(b.gathered_bytes_layer) / (1024.0 * 1024.0));
  }
  c.lines.push_back(std::move(l));
  return c;
}

SvgChart CpPadding(const SimRecord& r) {
  SvgChart c;
  c.title = "CP compute padding per batch";
  c.x_label = "padding tokens / computed tokens";
  c.y_label = "batches";
  c.x_min = 0;
  c.x_max = 1;
  SvgBars bars{"batches per padding fraction bin", kPalette[2], {}, std::vector<double>(kPaddingBins, 0)};
  for (int i = 0; i <= kPaddingBins; ++i) bars.edges.push_back(static_cast<double>(i) / kPaddingBins);
  int64_t padded = 0, compute = 0;
  if (r.cp_size > 1) {
    for (const BatchRow& b : r.batches) {
      const double f = b.compute_tokens ? static_cast<double>(b.cp_padding_tokens) / b.compute_tokens : 0;
      bars.values[std::min(kPaddingBins - 1, static_cast<int>(f * kPaddingBins))] += 1;
      padded += b.cp_padding_tokens;
      compute += b.compute_tokens;
    }
  }
  c.subtitle = r.cp_size > 1 ? StrCat(Config(r), "; overall ", padded, " / ", compute, " computed tokens are padding")
                             : Config(r);
  if (r.cp_size <= 1) c.note = "cp=1: no CP split plans, so no CP padding (run with --cp-size > 1)";
  c.bars.push_back(std::move(bars));
  return c;
}

// The share of requests whose time to first token is at most x seconds (prefilled requests only).
SvgChart TtftCdf(const SimRecord& r) {
  SvgChart c;
  c.title = "Time to first token (CDF)";
  c.x_label = "time to first token (s)";
  c.y_label = "share of requests";
  c.y_min = 0;
  c.y_max = 1;
  std::vector<double> ttft;
  for (const RequestRow& q : r.requests) {
    if (q.prefill_completed_us >= 0) ttft.push_back((q.prefill_completed_us - q.arrived_us) / 1e6);
  }
  std::sort(ttft.begin(), ttft.end());
  SvgLine l{"requests with TTFT <= x", kPalette[0], {}, {}, false};
  for (size_t i = 0; i < ttft.size(); ++i) {
    l.x.push_back(ttft[i]);
    l.y.push_back(static_cast<double>(i + 1) / static_cast<double>(ttft.size()));
  }
  auto at = [&](double q) {
    return ttft.empty() ? 0.0 : ttft[std::min(ttft.size() - 1, static_cast<size_t>(q * ttft.size()))];
  };
  c.subtitle = StrCat(Config(r), "; ", ttft.size(), " requests; p50 ", TickLabel(at(0.5)), " s, p99 ",
                      TickLabel(at(0.99)), " s");
  if (ttft.empty()) c.note = "no request was prefilled";
  c.lines.push_back(std::move(l));
  return c;
}

// Requests arrived and not yet scheduled (the waiting queue and the bootstrap queue), stepped at each arrival and
// each first chunk.
SvgChart QueueLength(const SimRecord& r) {
  SvgChart c;
  c.title = "Requests waiting to be scheduled";
  c.subtitle = StrCat(Config(r), "; arrived and not yet in a batch");
  c.x_label = "simulated time (s)";
  c.y_label = "requests waiting";
  std::vector<std::pair<double, int>> events;  // (time, +1 arrival / -1 first chunk)
  for (const RequestRow& q : r.requests) {
    events.push_back({q.arrived_us, +1});
    if (q.scheduled_us >= 0) events.push_back({q.scheduled_us, -1});
  }
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;  // at a tie, arrivals first
  });
  SvgLine l{"waiting (longer runs: each bucket's min and max)", kPalette[1], {}, {}, false};
  int64_t waiting = 0;
  for (const auto& [t, d] : events) {
    waiting += d;
    l.x.push_back(t / 1e6);
    l.y.push_back(static_cast<double>(waiting));
  }
  c.lines.push_back(std::move(l));
  return c;
}

}  // namespace

std::vector<Plot> BuildPlots(const SimRecord& record) {
  return {{"pages_in_use.svg", PagesInUse(record)},
          {"prefix_hit_rate.svg", HitRate(record)},
          {"gathered_bytes.svg", GatheredBytes(record)},
          {"cp_padding.svg", CpPadding(record)},
          {"ttft_cdf.svg", TtftCdf(record)},
          {"queue_length.svg", QueueLength(record)}};
}

}  // namespace kvshard::sim
