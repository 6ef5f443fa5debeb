// A cluster of sharded prefill nodes behind a router (Simulate, for every instance count): each arrival is routed
// when it arrives, with every node run up to that time first, so least-loaded and prefix-affinity see the nodes as
// they are then; the nodes then drain, and the cluster's figures are merged from theirs.
#include <algorithm>
#include <limits>
#include <memory>
#include <unordered_set>

#include "core/hash.h"
#include "sim/simulation.h"

namespace kvshard::sim {
namespace {

// The router's view of one node for prefix-affinity: hashes of the page prefixes of the prompts routed to it
// (sgl-router's approximate tree of routed text, without its eviction).
using RoutedPrefixes = std::unordered_set<uint64_t>;

// Hashes of a prompt's page prefixes: element k stands for pages 0..k.
std::vector<uint64_t> PrefixHashes(const std::vector<uint64_t>& fps) {
  std::vector<uint64_t> out(fps.size());
  uint64_t h = 0xbb67ae8584caa73bull;
  for (size_t k = 0; k < fps.size(); ++k) out[k] = h = Mix64(h ^ fps[k]);
  return out;
}

int64_t LeastLoaded(const std::vector<std::unique_ptr<internal::Simulation>>& nodes) {
  int64_t best = 0;
  for (int64_t k = 1; k < static_cast<int64_t>(nodes.size()); ++k) {
    if (nodes[k]->Outstanding() < nodes[best]->Outstanding()) best = k;
  }
  return best;
}

// Cluster figures from the nodes': counts summed, peaks maxed, distributions over all requests.
SimResult Merge(const std::vector<std::unique_ptr<internal::Simulation>>& sims, std::vector<SimResult> nodes,
                double first_arrival_s) {
  SimResult t;
  std::vector<double> ttft, queue, transfer, gathered, batch_us;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const SimResult& n = nodes[k];
    t.requests += n.requests;
    t.batches += n.batches;
    t.extend_tokens += n.extend_tokens;
    t.hash_blocks += n.hash_blocks;
    t.hit_blocks += n.hit_blocks;
    t.input_tokens += n.input_tokens;
    t.cached_tokens += n.cached_tokens;
    t.deferrals += n.deferrals;
    t.declined_grafts += n.declined_grafts;
    t.evicted_pages += n.evicted_pages;
    t.duplicate_pages += n.duplicate_pages;
    t.chunk_inserts += n.chunk_inserts;
    t.chunk_declined_grafts += n.chunk_declined_grafts;
    if (n.violations > 0 && t.violations == 0) t.first_violation = StrCat("node ", k, ": ", n.first_violation);
    t.violations += n.violations;
    t.pool_pages_per_rank = n.pool_pages_per_rank;
    t.pages_in_use_max = std::max(t.pages_in_use_max, n.pages_in_use_max);
    t.pages_in_use_mean += n.pages_in_use_mean / static_cast<double>(nodes.size());
    t.pages_in_use_skew_max = std::max(t.pages_in_use_skew_max, n.pages_in_use_skew_max);
    t.pages_in_use_skew_mean += n.pages_in_use_skew_mean / static_cast<double>(nodes.size());
    t.cp_compute_tokens += n.cp_compute_tokens;
    t.cp_padding_tokens += n.cp_padding_tokens;
    t.simulated_s = std::max(t.simulated_s, n.simulated_s);
    t.direct_write_pages += n.direct_write_pages;
    t.owner_mismatch_pages += n.owner_mismatch_pages;
    t.direct_write_failed_batches += n.direct_write_failed_batches;
    t.direct_write_failed_ranks += n.direct_write_failed_ranks;
    t.gather_plan_rejections += n.gather_plan_rejections;
    t.class_exhausted_deferrals += n.class_exhausted_deferrals;
    t.arrival_span_s = n.arrival_span_s;
    t.busy_s += n.busy_s;
    t.prefill_end_s = std::max(t.prefill_end_s, n.prefill_end_s);
    t.utilization = std::max(t.utilization, n.utilization);
    t.max_waiting = std::max(t.max_waiting, n.max_waiting);
    t.waiting_at_last_arrival += n.waiting_at_last_arrival;
    t.slo_met += n.slo_met;
    t.kv_peak_bytes_per_rank = std::max(t.kv_peak_bytes_per_rank, n.kv_peak_bytes_per_rank);
    t.kv_pool_bytes_per_rank = n.kv_pool_bytes_per_rank;
    t.no_token_stops += n.no_token_stops;
    t.scratch_stops += n.scratch_stops;
    const internal::Simulation& s = *sims[k];
    ttft.insert(ttft.end(), s.ttft_ms().begin(), s.ttft_ms().end());
    queue.insert(queue.end(), s.queue_ms().begin(), s.queue_ms().end());
    transfer.insert(transfer.end(), s.transfer_ms().begin(), s.transfer_ms().end());
    gathered.insert(gathered.end(), s.gathered().begin(), s.gathered().end());
    batch_us.insert(batch_us.end(), s.batch_us().begin(), s.batch_us().end());
  }
  t.ttft_ms = internal::Summarize(ttft);
  t.queue_ms = internal::Summarize(queue);
  t.transfer_ms = internal::Summarize(transfer);
  t.gathered_bytes_layer = internal::Summarize(gathered);
  t.batch_time_us = internal::Summarize(batch_us);
  internal::SetRates(first_arrival_s, &t);
  t.nodes = std::move(nodes);
  return t;
}

}  // namespace

const char* RouterName(Router router) {
  switch (router) {
    case Router::kLeastLoaded: return "least-loaded";
    case Router::kPrefixAffinity: return "prefix-affinity";
    case Router::kRoundRobin: break;
  }
  return "round-robin";
}

StatusOr<SimResult> Simulate(const Workload& workload, const SimConfig& config, const SimProgress& progress,
                             SimRecord* record) {
  KVSHARD_RETURN_IF_ERROR(ValidateSimConfig(config));
  const int64_t k_nodes = config.instances;
  if (k_nodes > 1 && (record != nullptr || config.observer != nullptr)) {
    return InvalidArgument("instances: the timeline, CSV, plot and trace outputs record one node; got instances ",
                           k_nodes);
  }
  std::vector<std::unique_ptr<internal::Simulation>> nodes;
  for (int64_t k = 0; k < k_nodes; ++k) {
    nodes.push_back(std::make_unique<internal::Simulation>(workload, config, record, k_nodes));
    KVSHARD_RETURN_IF_ERROR(nodes.back()->Setup());
  }
  std::vector<RoutedPrefixes> routed(k_nodes);
  const int64_t total = static_cast<int64_t>(workload.requests.size());
  auto finished = [&] {
    int64_t sum = 0;
    for (const auto& n : nodes) sum += n->finished();
    return sum;
  };
  for (int64_t i = 0; i < total; ++i) {
    const WorkloadRequest& w = workload.requests[i];
    const double t = static_cast<double>(w.arrival_us) * config.time_scale;
    for (auto& n : nodes) KVSHARD_RETURN_IF_ERROR(n->RunUntil(t));
    int64_t to = 0;
    if (k_nodes > 1) {
      switch (config.router) {
        case Router::kRoundRobin: to = i % k_nodes; break;
        case Router::kLeastLoaded: to = LeastLoaded(nodes); break;
        case Router::kPrefixAffinity: {
          const std::vector<uint64_t> prefixes =
              PrefixHashes(internal::Fingerprints(w, i, workload.block_tokens, config.page_size));
          int64_t best = -1, best_pages = 0;
          for (int64_t k = 0; k < k_nodes; ++k) {
            int64_t pages = 0;
            while (pages < static_cast<int64_t>(prefixes.size()) && routed[k].count(prefixes[pages])) ++pages;
            if (pages > best_pages ||
                (pages == best_pages && best >= 0 && nodes[k]->Outstanding() < nodes[best]->Outstanding())) {
              best = k;
              best_pages = pages;
            }
          }
          // cache_threshold 0.5: the match must cover half the prompt, else the least loaded node takes it.
          to = best >= 0 && 2 * best_pages * config.page_size >= w.input_tokens ? best : LeastLoaded(nodes);
          routed[to].insert(prefixes.begin(), prefixes.end());
          break;
        }
      }
    }
    nodes[to]->set_last_request(i);
    nodes[to]->Offer(&w, i);
    if (progress && i % 256 == 0) progress(finished(), total);
  }
  std::vector<SimResult> results;
  for (auto& n : nodes) {
    KVSHARD_RETURN_IF_ERROR(n->RunUntil(std::numeric_limits<double>::infinity()));
    if (progress) progress(finished(), total);
    KVSHARD_ASSIGN_OR_RETURN(SimResult r, n->Finish());
    results.push_back(std::move(r));
  }
  if (k_nodes == 1) return std::move(results[0]);
  const double first_arrival_s =
      workload.requests.empty() ? 0 : static_cast<double>(workload.requests[0].arrival_us) * config.time_scale / 1e6;
  return Merge(nodes, std::move(results), first_arrival_s);
}

}  // namespace kvshard::sim
