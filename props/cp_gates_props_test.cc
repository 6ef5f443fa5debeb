// Seed 003's gates and padding (cpu_ref/cp_helpers.h) as algebra, written from their definitions: cal_padded_tokens
// pads to a multiple of N by less than N (then, round-robin, divides by N rounding up), taking the largest rank's
// tokens when the DP padding mode is MAX_LEN; can_cp_split admits exactly the batches whose split exists — the
// token-balanced zigzag's 2N segments all non-empty with at least N extend tokens, the shared-KV batch plan built,
// the round-robin split giving every token to one rank. SGLang's own code, where present, is diffed by
// props/sglang_parity_cp.py; these run everywhere.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "core/cp_plan.h"
#include "cpu_ref/cp_helpers.h"
#include "cpu_ref/cp_split.h"
#include "props/property.h"
#include "props/rc_status.h"

namespace kvshard::props {
namespace {

int64_t CeilAlign(int64_t t, int64_t n) { return (t + n - 1) / n * n; }

KVSHARD_PROP(CpGatesProps, CalPaddedTokensPadsByLessThanN, ()) {
  const int64_t n = *rc::gen::inRange<int64_t>(1, 17);
  ref::CpForwardState b;
  const int64_t dp = *rc::gen::element<int64_t>(1, 1, 2, 4);
  b.attention_dp_size = dp;
  b.attention_dp_rank = *rc::gen::inRange<int64_t>(0, dp);
  b.is_extend_in_batch = *rc::gen::arbitrary<bool>();
  b.global_num_tokens_cpu = Int64List{};
  for (int64_t i = 0; i < dp; ++i) b.global_num_tokens_cpu->push_back(*rc::gen::inRange<int64_t>(0, 5000));
  b.extend_seq_lens_cpu = Int64List{*rc::gen::inRange<int64_t>(0, 3 * n + 2)};
  b.is_context_parallel_extend = *rc::gen::arbitrary<bool>();
  ref::CpServerArgs args;
  if (*rc::gen::arbitrary<bool>()) args.nsa_prefill_cp_mode = "round-robin-split";
  const int64_t padded = RC_VALUE(ref::CalPaddedTokens(b, args, n));
  const Int64List& tokens = *b.global_num_tokens_cpu;
  int64_t sum = 0, max = 0;
  for (int64_t t : tokens) sum += CeilAlign(t, n), max = std::max(max, CeilAlign(t, n));
  // DpPaddingMode: SUM_LEN for an extend batch with DP > 1, else MAX_LEN iff 2 x sum >= max x dp.
  const bool max_len = !(b.is_extend_in_batch && dp > 1) && 2 * sum >= max * dp;
  const int64_t own = tokens[static_cast<size_t>(dp > 1 ? b.attention_dp_rank : 0)];
  const int64_t chosen = max_len ? *std::max_element(tokens.begin(), tokens.end()) : own;
  const int64_t extend = (*b.extend_seq_lens_cpu)[0];
  const bool round_robin = args.nsa_prefill_cp_mode == "round-robin-split" && b.is_context_parallel_extend &&
                           extend > 0 && extend >= n && n > 1;
  const int64_t aligned = round_robin ? padded * n : padded;  // the padding before the round-robin division
  RC_ASSERT(aligned % n == 0);
  RC_ASSERT(aligned >= chosen);
  if (!round_robin) {
    RC_ASSERT(aligned - chosen < n);  // the least multiple of N that holds the chosen rank's tokens
  } else {
    RC_ASSERT(aligned - CeilAlign(chosen, n) < n);  // ceil(x / N) of the aligned count x
  }
  if (max_len) {
    for (int64_t t : tokens) RC_ASSERT(aligned >= t);  // MAX_LEN: every DP rank's tokens fit
  }
  RC_CLASSIFY(round_robin, "round-robin");
  RC_CLASSIFY(max_len, "MAX_LEN");
  RC_CLASSIFY(n == 1, "N = 1");
}

// A CP batch: extend lengths (zeros allowed), page-aligned prefixes, everything else switched on.
struct GateBatch {
  ref::CpForwardState batch;
  int64_t n = 2, seq_len = 0, extend_tokens = 0;
};

GateBatch DrawGateBatch(bool shared_kv) {
  GateBatch g;
  g.n = *rc::gen::inRange<int64_t>(2, 9);
  const int64_t ps = *rc::gen::element<int64_t>(2, 4, 16);
  const int64_t bs = shared_kv ? *rc::gen::inRange<int64_t>(1, 4) : 1;
  Int64List extend, prefix;
  for (int64_t q = 0; q < bs; ++q) {
    extend.push_back(*rc::gen::oneOf(rc::gen::inRange<int64_t>(0, 4 * g.n + 3), rc::gen::inRange<int64_t>(0, 200)));
    prefix.push_back(ps * *rc::gen::inRange<int64_t>(0, 4));
    g.extend_tokens += extend.back();
  }
  g.batch.uses_cp_shared_kv = shared_kv;
  g.batch.extend_seq_lens_cpu = extend;
  g.batch.extend_prefix_lens_cpu = prefix;
  g.batch.page_size = ps;
  g.seq_len = g.extend_tokens;
  return g;
}

// In-seq split, no shared KV: can_cp_split iff the token-balanced zigzag split of seq_len has 2N non-empty
// segments and the batch has at least N extend tokens.
KVSHARD_PROP(CpGatesProps, CanCpSplitIffTheZigzagSplitExists, ()) {
  GateBatch g = DrawGateBatch(false);
  if (*rc::gen::inRange(0, 4) == 0) g.seq_len = *rc::gen::inRange<int64_t>(0, 4 * g.n + 3);  // seq_len != extend
  const bool can = RC_VALUE(ref::CanCpSplit(g.seq_len, g.n, true, g.batch, ref::CpServerArgs{}));
  const Int64List split = RC_VALUE(ref::BuildTokenBalancedInSeqSplitList(g.seq_len, g.n));
  RC_ASSERT(static_cast<int64_t>(split.size()) == 2 * g.n);
  RC_ASSERT(std::accumulate(split.begin(), split.end(), int64_t{0}) == g.seq_len);
  const bool all_non_empty = std::all_of(split.begin(), split.end(), [](int64_t s) { return s > 0; });
  RC_ASSERT(can == (all_non_empty && g.extend_tokens >= g.n));
  RC_CLASSIFY(can, "admitted");
  RC_CLASSIFY(g.seq_len == 2 * g.n || g.seq_len == 2 * g.n - 1, "at the threshold");
}

// Shared KV: can_cp_split iff the batch has an extend token, and then the page-aligned batch plan exists for
// every rank.
KVSHARD_PROP(CpGatesProps, CanCpSplitSharedKvIffTheBatchPlanExists, ()) {
  const GateBatch g = DrawGateBatch(true);
  const bool can = RC_VALUE(ref::CanCpSplit(g.seq_len, g.n, true, g.batch, ref::CpServerArgs{}));
  RC_ASSERT(can == (g.extend_tokens >= 1));
  bool plans = true;
  for (int64_t rank = 0; rank < g.n; ++rank) {
    plans = plans && ref::BuildBatchPageAlignedInSeqSplitPlan(
                         *g.batch.extend_seq_lens_cpu, *g.batch.extend_prefix_lens_cpu, g.batch.page_size, g.n, rank)
                         .ok();
  }
  if (can && g.batch.extend_seq_lens_cpu->size() == 1) RC_ASSERT(plans);
  if (can && std::all_of(g.batch.extend_seq_lens_cpu->begin(), g.batch.extend_seq_lens_cpu->end(),
                         [](int64_t e) { return e > 0; })) {
    RC_ASSERT(plans);
  }
  RC_CLASSIFY(can, "admitted");
}

// Round robin: seq_len must divide by N (an error otherwise); then can_cp_split iff each rank gets at least one
// of the seq_len tokens and the batch has N extend tokens, and the round-robin split of the extend lengths gives
// every token to exactly one rank.
KVSHARD_PROP(CpGatesProps, CanCpSplitRoundRobinIffEveryRankGetsTokens, ()) {
  GateBatch g = DrawGateBatch(false);
  ref::CpServerArgs args;
  args.nsa_prefill_cp_mode = "round-robin-split";
  const StatusOr<bool> can = ref::CanCpSplit(g.seq_len, g.n, true, g.batch, args);
  if (g.seq_len % g.n != 0) {
    RC_ASSERT(!can.ok());
    RC_ASSERT(can.status().message().find("not divisible by cp_size") != std::string::npos);
    return;
  }
  RC_ASSERT(can.ok());
  RC_ASSERT(*can == (g.seq_len / g.n > 0 && g.extend_tokens >= g.n));
  if (!*can) return;
  int64_t dealt = 0;
  for (int64_t rank = 0; rank < g.n; ++rank) {
    const ref::RoundRobinQSeqs q = RC_VALUE(ref::RoundRobinSplitQSeqs(*g.batch.extend_seq_lens_cpu, g.n, rank));
    RC_ASSERT(!q.q_lens.empty());
    dealt += std::accumulate(q.q_lens.begin(), q.q_lens.end(), int64_t{0});
  }
  RC_ASSERT(dealt == g.extend_tokens);
}

}  // namespace
}  // namespace kvshard::props
