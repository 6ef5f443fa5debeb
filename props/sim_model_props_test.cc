// The simulator's reported figures against naive models written from SGLang's definitions (docs/simulate.md's
// rules table), on random small workloads and configurations: totals are the sums of the CSV rows, block hits
// follow from the matched tokens, matched tokens equal a naive trie when one request runs at a time, chunks follow
// PrefillAdder's chunk rule, requests are released in the order of SGLang's inflight queue, and each request holds
// its pages until a FIFO link model says its KV reached the decode side.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/status.h"
#include "core/workload.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "props/sim_generators.h"
#include "sim/csv_tables.h"
#include "sim/observer.h"
#include "sim/record.h"
#include "sim/simulator.h"

namespace kvshard::props {
namespace {

// One chunk of one request in a committed batch, as the observer sees it.
struct Chunk {
  int64_t request = 0, prefix_len = 0, seq_len = 0;
};

// Records the committed batches (in run order, each in batch order) and the lock drops, each with the number of
// batches committed before it.
class ChunkObserver : public sim::SimObserver {
 public:
  void OnBatch(const std::vector<int64_t>& requests, const std::vector<ExtendRequest>& batch) override {
    std::vector<Chunk> chunks;
    for (size_t i = 0; i < requests.size(); ++i) chunks.push_back({requests[i], batch[i].prefix_len, batch[i].seq_len});
    batches.push_back(std::move(chunks));
  }
  void OnUnlock(int64_t request) override { unlocks.push_back({request, batches.size()}); }

  std::vector<std::vector<Chunk>> batches;
  std::vector<std::pair<int64_t, size_t>> unlocks;  // (request, batches committed before the unlock)
};

// A finished run: the result, its record and what the observer saw.
struct Run {
  sim::SimResult result;
  sim::SimRecord record;
  ChunkObserver seen;
};

// The workload and configuration, for the counterexample.
std::string Describe(const Workload& w, const sim::SimConfig& c) {
  std::ostringstream os;
  os << "N=" << c.shard_size << " ps=" << c.page_size << " cache_tokens=" << c.cache_tokens
     << " chunked_prefill_size=" << c.chunked_prefill_size << " max_prefill_tokens=" << c.max_prefill_tokens
     << " max_running_requests=" << c.max_running_requests << " policy=" << sim::SchedulePolicyName(c.schedule_policy)
     << " time_scale=" << c.time_scale << " kv_transfer_gbps=" << c.kv_transfer_gbps
     << " bootstrap_ms=" << c.bootstrap_ms << " need_sort=" << c.need_sort << "\n";
  for (size_t i = 0; i < w.requests.size(); ++i) {
    const WorkloadRequest& r = w.requests[i];
    os << "  request " << i << ": arrival_us " << r.arrival_us << ", " << r.input_tokens << " tokens, blocks "
       << rc::toString(r.block_hashes) << "\n";
  }
  return os.str();
}

// Runs `w` under `c` with a record and the observer; false (tagged) when the simulator refuses the bounded pool.
bool RunSim(const Workload& w, sim::SimConfig c, Run* run) {
  RC_LOG() << Describe(w, c);
  c.observer = &run->seen;
  StatusOr<sim::SimResult> r = sim::Simulate(w, c, nullptr, &run->record);
  if (!r.ok()) {
    // Only a bounded pool can refuse a request.
    if (c.cache_tokens == 0 || r.status().message().rfind("cache_tokens: ", 0) != 0) {
      RC_FAIL("Simulate returned " + r.status().ToString());
    }
    RC_TAG("refused: pool too small");
    return false;
  }
  run->result = *std::move(r);
  if (run->result.first_violation.find("add_chunked_req's fallback") != std::string::npos) {
    RC_TAG("SGLang would assert: an off-page fallback chunk");  // reported, as SGLang's assert
    return false;
  }
  RC_ASSERT(run->result.violations == 0);
  RC_ASSERT(run->seen.batches.size() == run->record.batches.size());
  return true;
}

// A CSV table: its header's column names and its rows' fields.
struct Csv {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  // Field `name` of row `i` as a number ("" reads as -1: an event that never happened).
  double Num(size_t i, const std::string& name) const {
    const auto it = std::find(columns.begin(), columns.end(), name);
    RC_ASSERT(it != columns.end());
    const std::string& f = rows[i].at(static_cast<size_t>(it - columns.begin()));
    return f.empty() ? -1 : std::stod(f);
  }
  int64_t Int(size_t i, const std::string& name) const { return std::llround(Num(i, name)); }
};

Csv ParseCsv(const std::string& text) {
  Csv csv;
  std::istringstream in(text);
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::string field;
    std::istringstream ls(line);
    while (std::getline(ls, field, ',')) fields.push_back(field);
    if (!line.empty() && line.back() == ',') fields.push_back("");
    if (header) {
      csv.columns = fields;
      header = false;
    } else {
      RC_ASSERT(fields.size() == csv.columns.size());
      csv.rows.push_back(fields);
    }
  }
  return csv;
}

// |a - b| within `abs` plus a relative 1e-9.
bool Near(double a, double b, double abs) { return std::fabs(a - b) <= abs + 1e-9 * std::max(std::fabs(a), 1.0); }

// The SimResult totals are the sums of requests.csv's and batches.csv's rows: requests, prompt and cached tokens,
// hash blocks, block hits = Σ min(blocks, ⌊cached / block tokens⌋) (a partly matched block is no hit), batches,
// extend tokens, chunks, CP padding, busy time, and the TTFT, queueing and transfer totals in milliseconds.
KVSHARD_PROP(SimModelProps, TotalsAreTheSumsOfTheCsvRows, ()) {
  const Workload w = DrawWorkload();
  Run run;
  if (!RunSim(w, DrawConfig(w), &run)) return;
  const sim::SimResult& r = run.result;
  std::ostringstream req_text, batch_text;
  RC_ASSERT_OK(sim::WriteRequestsCsv(run.record, req_text));
  RC_ASSERT_OK(sim::WriteBatchesCsv(run.record, batch_text));
  const Csv reqs = ParseCsv(req_text.str()), batches = ParseCsv(batch_text.str());
  RC_ASSERT(reqs.rows.size() == w.requests.size());
  RC_ASSERT(r.requests == static_cast<int64_t>(reqs.rows.size()));
  int64_t input = 0, cached = 0, blocks = 0, hits = 0, chunks = 0;
  double ttft_ms = 0, queue_ms = 0, transfer_ms = 0;
  for (size_t i = 0; i < reqs.rows.size(); ++i) {
    RC_ASSERT(reqs.Int(i, "request_id") == static_cast<int64_t>(i));
    const int64_t request_blocks = static_cast<int64_t>(w.requests[i].block_hashes.size());
    input += reqs.Int(i, "num_prefill_tokens");
    cached += reqs.Int(i, "cached_tokens");
    blocks += request_blocks;
    hits += std::min(request_blocks, reqs.Int(i, "cached_tokens") / w.block_tokens);
    chunks += reqs.Int(i, "num_chunks");
    ttft_ms += reqs.Num(i, "ttft") * 1e3;
    queue_ms += (reqs.Num(i, "scheduled_at") - reqs.Num(i, "arrived_at")) * 1e3;
    transfer_ms += (reqs.Num(i, "completed_at") - reqs.Num(i, "prefill_completed_at")) * 1e3;
  }
  RC_ASSERT(r.input_tokens == input);
  RC_ASSERT(r.cached_tokens == cached);
  RC_ASSERT(r.hash_blocks == blocks);
  RC_ASSERT(r.hit_blocks == hits);
  RC_ASSERT(r.batches == static_cast<int64_t>(batches.rows.size()));
  int64_t extend = 0, batch_requests = 0, padding = 0;
  double busy_us = 0;
  for (size_t i = 0; i < batches.rows.size(); ++i) {
    extend += batches.Int(i, "num_prefill_tokens");
    batch_requests += batches.Int(i, "num_requests");
    padding += batches.Int(i, "cp_padding_tokens");
    busy_us += batches.Num(i, "total_us");
  }
  RC_ASSERT(r.extend_tokens == extend);
  RC_ASSERT(extend == input - cached);  // every prompt token is cached or computed, once
  RC_ASSERT(chunks == batch_requests);
  RC_ASSERT(r.cp_padding_tokens == padding);
  // The CSV rounds times to 1 µs (seconds, 6 decimals) and batch phases to 0.001 µs.
  const double n = static_cast<double>(reqs.rows.size());
  RC_ASSERT(Near(r.busy_s * 1e6, busy_us, 1e-3 * static_cast<double>(batches.rows.size())));
  RC_ASSERT(Near(r.ttft_ms.total, ttft_ms, 1e-3 * n));
  RC_ASSERT(Near(r.queue_ms.total, queue_ms, 2e-3 * n));
  RC_ASSERT(Near(r.transfer_ms.total, transfer_ms, 2e-3 * n));
  RC_CLASSIFY(r.hit_blocks > 0, "block hits");
  RC_CLASSIFY(cached > 0 && r.hit_blocks * w.block_tokens < cached, "partly matched blocks");
}

// With one request at a time (max_running_requests 1) and an unbounded pool, each request's cached tokens equal
// a naive trie of page contents (a token is (block id, offset): equal ids hold equal tokens): the longest run of
// cached leading full pages within its first input_length - 1 tokens; afterwards all its full pages are cached.
// Requests are taken in the order they were scheduled (lpm may reorder them).
KVSHARD_PROP(SimModelProps, CachedTokensEqualANaiveTrieOneRequestAtATime, ()) {
  const Workload w = DrawWorkload();
  sim::SimConfig c = DrawConfig(w);
  c.max_running_requests = 1;
  c.cache_tokens = 0;
  Run run;
  RC_ASSERT(RunSim(w, c, &run));
  std::vector<int64_t> order(w.requests.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return run.record.requests[static_cast<size_t>(a)].scheduled_us <
           run.record.requests[static_cast<size_t>(b)].scheduled_us;
  });
  using Token = std::pair<int64_t, int64_t>;                        // (block id, offset in the block)
  std::map<std::pair<int64_t, std::vector<Token>>, int64_t> child;  // (parent node, page's tokens) -> node
  int64_t nodes = 1, cached_total = 0;
  const int64_t ps = c.page_size, bt = w.block_tokens;
  for (int64_t id : order) {
    const WorkloadRequest& q = w.requests[static_cast<size_t>(id)];
    int64_t node = 0, matched_pages = 0;
    bool matching = true;
    for (int64_t k = 0; k < q.input_tokens / ps; ++k) {
      std::vector<Token> page;
      for (int64_t t = k * ps; t < (k + 1) * ps; ++t) page.emplace_back(q.block_hashes[t / bt], t % bt);
      const auto key = std::make_pair(node, page);
      const auto it = child.find(key);
      if (it == child.end()) {
        matching = false;
        node = child[key] = nodes++;
      } else {
        node = it->second;
        if (matching && (k + 1) * ps <= q.input_tokens - 1) ++matched_pages;
      }
    }
    RC_ASSERT(run.record.requests[static_cast<size_t>(id)].cached_tokens == matched_pages * ps);
    cached_total += matched_pages * ps;
  }
  RC_ASSERT(run.result.cached_tokens == cached_total);
  RC_CLASSIFY(cached_total > 0, "prefix hits");
}

// PrefillAdder's chunk rule (add_chunked_req, add_one_req): each request's chunks continue where the last ended,
// from its cached prefix to its prompt's end; a chunk that does not end its request ends on a page (the kv-shard
// granule; the model keeps it at N = 1). With an unbounded pool (only the chunk budget cuts) every chunk length is
// the rule's: the batch's budget is chunked_prefill_size less the earlier chunks ceiled to pages; the continuing
// request takes min(rest, budget), its end floored to the page (the budget floored when that leaves nothing); a new
// request whole when its rest ceiled to pages fits, else the budget floored to pages. Unchunked (size <= 0, N = 1
// only): every request in one chunk.
KVSHARD_PROP(SimModelProps, ChunksFollowPrefillAddersChunkRule, ()) {
  const Workload w = DrawWorkload();
  sim::SimConfig c = DrawConfig(w);
  const int64_t ps = c.page_size;
  const int64_t drawn = c.chunked_prefill_size, off_page = ps * *rc::gen::inRange<int64_t>(1, 5) + 1;
  const int64_t below_page = ps > 1 ? *rc::gen::inRange<int64_t>(1, ps) : drawn;
  c.chunked_prefill_size = *rc::gen::element(drawn, drawn, drawn, off_page, below_page, int64_t{0});
  if (c.shard_size > 1 && c.chunked_prefill_size <= 0) c.chunked_prefill_size = drawn;  // KV sharding needs chunks
  if (c.chunked_prefill_size < ps && c.chunked_prefill_size > 0) {
    // add_one_req ceils every extend to a page, so every request is cut to whole pages of a budget below one:
    // nothing would ever be admitted, and the simulator refuses the configuration before it runs.
    RC_TAG("chunk budget below a page");
    const StatusOr<sim::SimResult> r = sim::Simulate(w, c);
    RC_ASSERT(!r.ok());
    RC_ASSERT(r.status().message().rfind("chunked_prefill_size: ", 0) == 0u);
    return;
  }
  Run run;
  if (!RunSim(w, c, &run)) return;
  const int64_t cps = c.chunked_prefill_size;
  const auto ceil_page = [&](int64_t t) { return (t + ps - 1) / ps * ps; };
  std::vector<int64_t> done(w.requests.size(), -1);  // -1: not admitted yet
  for (const std::vector<Chunk>& batch : run.seen.batches) {
    int64_t budget = cps;
    for (size_t i = 0; i < batch.size(); ++i) {
      const Chunk& k = batch[i];
      const size_t id = static_cast<size_t>(k.request);
      const int64_t input = w.requests[id].input_tokens;
      const bool first = done[id] < 0;
      if (first) {
        RC_ASSERT(k.prefix_len == run.record.requests[id].cached_tokens);
      } else {
        RC_ASSERT(i == 0u);  // the continuing (chunked) request leads its batch
        RC_ASSERT(k.prefix_len == done[id]);
      }
      RC_ASSERT(k.prefix_len < k.seq_len && k.seq_len <= input);
      if (k.seq_len < input) RC_ASSERT(k.seq_len % ps == 0);
      if (cps <= 0) RC_ASSERT(k.seq_len == input);
      if (cps > 0 && c.cache_tokens == 0) {
        const int64_t rest = input - k.prefix_len;
        int64_t expected = 0;
        if (!first) {
          const int64_t floored = (k.prefix_len + budget) / ps * ps - k.prefix_len;
          expected = std::min(rest, floored > 0 ? floored : budget / ps * ps);
        } else {
          expected = ceil_page(rest) <= budget ? rest : budget / ps * ps;
        }
        RC_ASSERT(k.seq_len - k.prefix_len == expected);
        budget -= ceil_page(k.seq_len - k.prefix_len);
      }
      done[id] = k.seq_len;
    }
  }
  for (size_t i = 0; i < w.requests.size(); ++i) RC_ASSERT(done[i] == w.requests[i].input_tokens);
  bool multi = false;
  for (const sim::RequestRow& r : run.record.requests) multi = multi || r.chunks > 1;
  RC_CLASSIFY(multi, "chunked requests");
}

// The inflight queue (requests in the order their prefills ended: batch after batch, in batch order), the releases
// (lock drops after the request's prefill, in order), and whether an admission was undone: a deferred batch unlocks
// its admissions too, before their prefill (which may come later, from a second admission), and that is no release.
struct Releases {
  std::vector<int64_t> queue, released;
  bool undone = false;
};
Releases ReleasesOf(const Workload& w, const Run& run) {
  Releases r;
  std::vector<size_t> prefilled_in(w.requests.size(), SIZE_MAX);  // the batch that ended each request's prefill
  for (size_t b = 0; b < run.seen.batches.size(); ++b) {
    for (const Chunk& k : run.seen.batches[b]) {
      if (k.seq_len == w.requests[static_cast<size_t>(k.request)].input_tokens) {
        r.queue.push_back(k.request);
        prefilled_in[static_cast<size_t>(k.request)] = b;
      }
    }
  }
  for (const auto& [q, committed] : run.seen.unlocks) {
    const size_t b = prefilled_in[static_cast<size_t>(q)];
    if (b != SIZE_MAX && b < committed) {
      r.released.push_back(q);
    } else {
      r.undone = true;
    }
  }
  return r;
}

// SGLang's process_disagg_prefill_inflight_queue: a request joins the inflight queue when its prefill ends
// (batch after batch, in batch order) and is released, its lock dropped, in queue order once its transfer is done.
// Several transfers done by one poll (slow links, small batches), or ending together, go in that order too.
KVSHARD_PROP(SimModelProps, ReleasesFollowTheInflightQueue, ()) {
  const Workload w = DrawWorkload();
  Run run;
  if (!RunSim(w, DrawConfig(w), &run)) return;
  const Releases r = ReleasesOf(w, run);
  RC_CLASSIFY(r.undone, "an admission undone");
  RC_ASSERT(r.released == r.queue);
  bool reordered = false;
  for (size_t i = 1; i < r.queue.size(); ++i) reordered = reordered || r.queue[i] < r.queue[i - 1];
  RC_CLASSIFY(reordered, "released out of id order");
}

// The counterexample RapidCheck found for the property above, whose check then counted every unlock of a request
// that was ever prefilled as a release: a batch deferred on a slow link, its admission undone (request 14
// unlocked), admitted again and prefilled later (unlocked again, its release). Rare in the generated runs, so kept.
TEST(SimModelProps, AnAdmissionUndoneByADeferralIsNoRelease) {
  Workload w;
  w.format = WorkloadFormat::kQwen;
  w.block_tokens = 16;
  const std::vector<std::tuple<int64_t, int64_t, std::vector<int64_t>>> requests = {
      {200000, 17, {100, 1000}}, {200100, 1, {0}},
      {400100, 1, {0}},          {400100, 1, {0}},
      {405100, 25, {0, 1004}},   {405100, 89, {0, 1, 2, 3, 4, 1005}},
      {405100, 1, {0}},          {410100, 1, {0}},
      {410100, 17, {100, 101}},  {610100, 17, {0, 1009}},
      {810100, 25, {0, 1010}},   {815100, 1, {0}},
      {1015100, 1, {0}},         {1020100, 22, {100, 1013}},
      {1220100, 3, {0}},         {1420100, 65, {100, 101, 102, 103, 1015}},
      {1420200, 1, {0}}};
  for (const auto& [arrival, tokens, blocks] : requests) {
    WorkloadRequest r;
    r.arrival_us = arrival;
    r.input_tokens = tokens;
    r.block_hashes = blocks;
    w.requests.push_back(r);
  }
  sim::SimConfig c;
  c.shard_size = 2;
  c.page_size = 1;
  c.cache_tokens = 182;
  c.chunked_prefill_size = 1;
  c.max_prefill_tokens = 1;
  c.max_running_requests = 2;
  c.schedule_policy = sim::SchedulePolicy::kLpm;
  c.time_scale = 0;
  c.kv_transfer_gbps = 0.001;
  struct Run run;  // (gtest's fixture has a Run member)
  c.observer = &run.seen;
  const StatusOr<sim::SimResult> result = sim::Simulate(w, c, nullptr, &run.record);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_GT(result->deferrals, 0);
  EXPECT_EQ(result->violations, 0);
  const Releases r = ReleasesOf(w, run);
  EXPECT_TRUE(r.undone);
  EXPECT_EQ(r.released, r.queue);
  EXPECT_EQ(r.queue.size(), w.requests.size());
}

// Each request holds its pages from the start of its first chunk's batch until its KV reached the decode side,
// as a FIFO link model says in seconds: after each batch, every request whose prefill ended in it sends its
// unsent tokens (batch order), then the chunked request its new chunk; a send of T tokens takes
// T · kv_bytes · layers / N bytes per rank at kv_transfer_gbps · 10^9 / 8 bytes per second, starting when the batch
// ends or the link is free. A request is scheduled no earlier than its arrival (· time_scale) plus bootstrap_ms.
KVSHARD_PROP(SimModelProps, PagesAreHeldUntilTheLinkModelSaysTheKvArrived, ()) {
  const Workload w = DrawWorkload();
  Run run;
  const sim::SimConfig c = DrawConfig(w);
  if (!RunSim(w, c, &run)) return;
  const size_t n = w.requests.size();
  std::vector<int64_t> sent(n, 0);
  std::vector<double> scheduled_s(n, -1), completed_s(n, -1);
  const double bytes_per_token = static_cast<double>(c.kv_bytes_per_token_layer) * static_cast<double>(c.cost.layers) /
                                 static_cast<double>(c.shard_size);
  const double link_bytes_per_s = c.kv_transfer_gbps * 1e9 / 8;
  double link_free_s = 0;
  for (size_t b = 0; b < run.seen.batches.size(); ++b) {
    const double start_s = run.record.batches[b].start_us / 1e6, end_s = run.record.batches[b].end_us / 1e6;
    auto send = [&](const Chunk& k) {
      const size_t id = static_cast<size_t>(k.request);
      link_free_s =
          std::max(end_s, link_free_s) + static_cast<double>(k.seq_len - sent[id]) * bytes_per_token / link_bytes_per_s;
      sent[id] = k.seq_len;
      if (k.seq_len == w.requests[id].input_tokens) completed_s[id] = link_free_s;
    };
    for (const Chunk& k : run.seen.batches[b]) {
      const size_t id = static_cast<size_t>(k.request);
      if (scheduled_s[id] < 0) scheduled_s[id] = start_s;
      if (k.seq_len == w.requests[id].input_tokens) send(k);
    }
    for (const Chunk& k : run.seen.batches[b]) {
      if (k.seq_len < w.requests[static_cast<size_t>(k.request)].input_tokens) send(k);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const sim::RequestRow& row = run.record.requests[i];
    const double arrived_s = static_cast<double>(w.requests[i].arrival_us) * c.time_scale / 1e6;
    RC_ASSERT(Near(row.arrived_us / 1e6, arrived_s, 1e-12));
    RC_ASSERT(row.scheduled_us / 1e6 >= arrived_s + c.bootstrap_ms / 1e3 - 1e-9);
    const double held_s = (row.completed_us - row.scheduled_us) / 1e6;
    RC_ASSERT(Near(held_s, completed_s[i] - scheduled_s[i], 1e-9));
    RC_ASSERT(row.completed_us >= row.prefill_completed_us);
  }
  RC_ASSERT(Near(run.result.simulated_s, *std::max_element(completed_s.begin(), completed_s.end()), 1e-9));
  RC_CLASSIFY(c.kv_transfer_gbps < 1, "slow link");
  RC_CLASSIFY(c.bootstrap_ms > 0, "bootstrap");
}

}  // namespace
}  // namespace kvshard::props
