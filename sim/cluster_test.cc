// A cluster of prefill nodes (SimConfig::instances, router): each policy's routing, the cluster's figures as the
// nodes' sums and maxima, and the instance count at which an overloaded trace is served.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sim/output_test_util.h"
#include "sim/simulator.h"

namespace kvshard::sim {
namespace {

// `n` requests of three conversations taking turns (a, b, c, a, ...), each turn one block longer than the
// conversation's last, `gap_us` apart.
Workload ThreeConversations(int64_t n, int64_t gap_us) {
  std::string text;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t conv = i % 3, turn = i / 3 + 1;
    std::string ids;
    for (int64_t b = 0; b < turn; ++b) ids += StrCat(b ? ", " : "", conv * 1000 + b);
    text += StrCat("{\"timestamp\": ", i * gap_us / 1000, ", \"input_length\": ", 512 * turn - 30,
                   ", \"output_length\": 1, \"hash_ids\": [", ids, "]}\n");
  }
  return MooncakeWorkload(text);
}

SimConfig Cluster(int64_t instances, Router router) {
  SimConfig c;
  c.shard_size = 4;
  c.page_size = 64;
  c.instances = instances;
  c.router = router;
  return c;
}

TEST(ClusterTest, RoundRobinSendsRequestIToNodeIModK) {
  const StatusOr<SimResult> r = Simulate(ThreeConversations(40, 100000), Cluster(4, Router::kRoundRobin));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->nodes.size(), 4u);
  for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(r->nodes[k].requests, k < 40 % 4 ? 40 / 4 + 1 : 40 / 4) << k;
}

TEST(ClusterTest, ClusterFiguresAreTheNodesSumsAndMaxima) {
  const StatusOr<SimResult> r = Simulate(ThreeConversations(60, 50000), Cluster(3, Router::kLeastLoaded));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->violations, 0) << r->first_violation;
  int64_t requests = 0, batches = 0, cached = 0, input = 0, slo = 0;
  double utilization = 0, ttft_max = 0, busy = 0;
  for (const SimResult& n : r->nodes) {
    requests += n.requests;
    batches += n.batches;
    cached += n.cached_tokens;
    input += n.input_tokens;
    slo += n.slo_met;
    utilization = std::max(utilization, n.utilization);
    ttft_max = std::max(ttft_max, n.ttft_ms.max);
    busy += n.busy_s;
  }
  EXPECT_EQ(r->requests, 60);
  EXPECT_EQ(requests, 60);
  EXPECT_EQ(r->batches, batches);
  EXPECT_EQ(r->cached_tokens, cached);
  EXPECT_EQ(r->input_tokens, input);
  EXPECT_EQ(r->slo_met, slo);
  EXPECT_EQ(r->utilization, utilization);
  EXPECT_EQ(r->ttft_ms.max, ttft_max);
  EXPECT_DOUBLE_EQ(r->busy_s, busy);
}

TEST(ClusterTest, PrefixAffinityKeepsAConversationOnOneNode) {
  // Round-robin over two nodes alternates each of the three conversations between the nodes, so each turn finds
  // only the turn before last; prefix-affinity sends every turn where its conversation went.
  const Workload w = ThreeConversations(60, 200000);
  const StatusOr<SimResult> rr = Simulate(w, Cluster(2, Router::kRoundRobin));
  const StatusOr<SimResult> affinity = Simulate(w, Cluster(2, Router::kPrefixAffinity));
  ASSERT_TRUE(rr.ok()) << rr.status().ToString();
  ASSERT_TRUE(affinity.ok()) << affinity.status().ToString();
  EXPECT_GT(affinity->cached_tokens, rr->cached_tokens);
  const StatusOr<SimResult> one = Simulate(w, Cluster(1, Router::kRoundRobin));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(affinity->cached_tokens, one->cached_tokens);  // as if one cache held every conversation
}

TEST(ClusterTest, LeastLoadedSpreadsABurstEvenly) {
  std::string text;
  for (int i = 0; i < 31; ++i) {
    text += StrCat("{\"timestamp\": 0, \"input_length\": 3000, \"output_length\": 1, \"hash_ids\": [", 10 * i, ", ",
                   10 * i + 1, ", ", 10 * i + 2, ", ", 10 * i + 3, ", ", 10 * i + 4, ", ", 10 * i + 5, "]}\n");
  }
  const StatusOr<SimResult> r = Simulate(MooncakeWorkload(text), Cluster(3, Router::kLeastLoaded));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->nodes.size(), 3u);
  EXPECT_EQ(r->nodes[0].requests, 11);  // ties go to the lowest index: 11, 10, 10
  EXPECT_EQ(r->nodes[1].requests, 10);
  EXPECT_EQ(r->nodes[2].requests, 10);
}

TEST(ClusterTest, EnoughInstancesServeAnOverloadedTrace) {
  // A trace one node cannot keep up with stops being overloaded at some instance count, and without shared
  // prefixes (nothing for round-robin to scatter) the verdict never comes back as nodes are added. (With
  // conversations it can: three conversations on three round-robin nodes each stay on one node and hit their
  // cache; on four they scatter and every turn is prefilled whole.)
  const Workload w = UniquePrompts(90, 100);
  bool served = false;
  int64_t first_served = 0;
  for (int64_t k = 1; k <= 8; ++k) {
    const StatusOr<SimResult> r = Simulate(w, Cluster(k, Router::kRoundRobin));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (k == 1) {
      EXPECT_TRUE(Overloaded(*r)) << r->utilization;
    }
    if (served) {
      EXPECT_FALSE(Overloaded(*r)) << k;
    }
    if (!served && !Overloaded(*r)) {
      served = true;
      first_served = k;
    }
  }
  EXPECT_TRUE(served);
  EXPECT_GT(first_served, 1);
}

TEST(ClusterTest, OutputsNeedOneInstance) {
  SimRecord record;
  const StatusOr<SimResult> r =
      Simulate(ThreeConversations(3, 1000), Cluster(2, Router::kRoundRobin), nullptr, &record);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("instances: ", 0), 0u) << r.status().message();
}

}  // namespace
}  // namespace kvshard::sim
