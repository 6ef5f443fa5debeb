// kvshard split: SGLang's CP split plans for one rank: the in-seq zigzag batch plan (CPSharedKVBatchPlan and
// its communication metadata), round-robin q lengths, or the token-balanced split list.
#include <algorithm>
#include <ostream>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/memory_limit.h"
#include "replay/results.h"
#include "cli/split_owners.h"
#include "core/cp_limits.h"
#include "core/cp_plan_json.h"

namespace kvshard::cli {
namespace {

void PrintPlanTable(const CPSharedKVBatchPlan& p, const NSAContextParallelMetadata& m, std::ostream& out) {
  out << "in-seq split: cp_size=" << p.cp_size << " cp_rank=" << p.cp_rank << " page_size=" << p.page_size
      << " batch_size=" << p.batch_size << " compute_padding=" << (p.compute_padding_enabled ? "on" : "off") << "\n";
  out << Col(5) << "req" << Col(5) << "seg" << Col(6) << "rank" << Col(8) << "valid" << Col(16) << "valid pages"
      << Col(9) << "compute" << Col(16) << "compute pages"
      << "  here\n";
  const int64_t segments = 2 * p.cp_size;
  for (int64_t q = 0; q < p.batch_size; ++q) {
    for (int64_t s = 0; s < segments; ++s) {
      const int64_t rank = s < p.cp_size ? s : segments - 1 - s;
      const auto pages = [](int64_t a, int64_t b) { return "[" + std::to_string(a) + "," + std::to_string(b) + ")"; };
      out << Col(5) << q << Col(5) << s << Col(6) << rank << Col(8) << p.request_split_lists[q][s] << Col(16)
          << pages(p.request_segment_page_starts[q][s], p.request_segment_page_ends[q][s]) << Col(9)
          << p.request_compute_split_lists[q][s] << Col(16)
          << pages(p.request_compute_segment_page_starts[q][s], p.request_compute_segment_page_ends[q][s])
          << (rank == p.cp_rank ? "  *" : "") << "\n";
    }
    out << "  req " << q << ": extend=" << p.request_extend_lens[q] << " prefix=" << p.request_prefix_lens[q]
        << " kv_len_prev/next=" << p.request_kv_len_prev[q] << "/" << p.request_kv_len_next[q] << " last token: rank "
        << p.request_last_token_owner[q] << " local offset " << p.request_last_token_local_offset[q] << "\n";
  }
  out << "per_rank_actual_token=" << ListText(m.per_rank_actual_token) << " max_rank_len=" << m.max_rank_token()
      << " (* = segments computed by cp_rank " << p.cp_rank << ")\n";
}

// `split --json` written field by field: byte-identical to PrintJson(InSeqSplitJson(split)), holding one
// field's JSON at a time instead of the whole tree.
void PrintInSeqSplitJsonStreamed(const replay::InSeqSplit& split, std::ostream& out) {
  JsonObjectWriter writer(out);
  ForEachJsonField(split.plan, nullptr, [&](const char* key, Json value) { writer.Field(key, value); });
  writer.Field("nsa_cp_metadata", ToJson(split.metadata));
  writer.End();
}

Status RunInSeq(const Flags& flags, std::ostream& out) {
  KVSHARD_RETURN_IF_ERROR(flags.Require({"cp-size", "page-size", "extend-lens"}));
  const std::vector<int64_t>& extend = flags.IntList("extend-lens");
  const bool json = flags.Bool("json");
  KVSHARD_RETURN_IF_ERROR(
      Budget(flags).SplitPlan("--extend-lens", static_cast<int64_t>(extend.size()), flags.Int("cp-size"), json));
  StatusOr<replay::InSeqSplit> split =
      replay::BuildInSeqSplit(extend, PrefixLens(flags, extend.size()), flags.Int("page-size"), flags.Int("cp-size"),
                              flags.Int("cp-rank"), ImplFlag(flags));
  if (!split.ok()) return CpModelError(split.status());
  if (flags.Bool("json")) {
    PrintInSeqSplitJsonStreamed(*split, out);
  } else {
    PrintPlanTable(split->plan, split->metadata, out);
  }
  return Status::Ok();
}

Status RunRoundRobin(const Flags& flags, std::ostream& out) {
  KVSHARD_RETURN_IF_ERROR(flags.Require({"cp-size", "extend-lens"}));
  const int64_t cp_size = flags.Int("cp-size"), cp_rank = flags.Int("cp-rank");
  KVSHARD_RETURN_IF_ERROR(
      Budget(flags).RoundRobinSplit("--extend-lens", TotalTokens(flags.IntList("extend-lens")), cp_size));
  StatusOr<Json> r = replay::RoundRobinSplitJson(flags.IntList("extend-lens"), cp_size, cp_rank);
  if (!r.ok()) return CpModelError(r.status());
  if (flags.Bool("json")) {
    PrintJson(*r, out);
  } else {
    out << "round-robin split: cp_size=" << cp_size << " cp_rank=" << cp_rank << " (token t -> rank t % " << cp_size
        << ")\nq_lens=" << ListText((*r)["q_lens"].get<std::vector<int64_t>>())
        << "\nbs_idx=" << ListText((*r)["bs_idx"].get<std::vector<int64_t>>()) << "\n";
  }
  return Status::Ok();
}

Status RunTokenBalanced(const Flags& flags, std::ostream& out) {
  KVSHARD_RETURN_IF_ERROR(flags.Require({"cp-size", "total-len"}));
  const int64_t cp_size = flags.Int("cp-size"), total_len = flags.Int("total-len");
  StatusOr<Json> s = replay::TokenBalancedSplitJson(total_len, cp_size);
  if (!s.ok()) return CpModelError(s.status());
  if (flags.Bool("json")) {
    PrintJson(*s, out);
  } else {
    out << "token-balanced split: total_len=" << total_len << " cp_size=" << cp_size
        << "\nsplit_list=" << ListText((*s)["split_list"].get<std::vector<int64_t>>()) << "\n";
  }
  return Status::Ok();
}

void DeclareFlags(po::options_description& flags) {
  flags.add_options()("mode", Choice({"in-seq", "round-robin", "token-balanced", "owners"})->default_value("in-seq"),
                      "which split to build (owners: page compute owners and direct-write locs)")(
      "cp-size", Int(1, kMaxCpSize), "N, context-parallel ranks")("cp-rank", NonNegative()->default_value(0),
                                                                  "rank whose plan to build (in-seq, round-robin)")(
      "page-size", Int(1, kMaxCpPageSize), "ps, tokens per physical page (in-seq)")(
      "extend-lens", IntList()->AllowEmpty(), "extend (new) tokens per request")(
      "prefix-lens", IntList(), "cached prefix tokens per request (default: all 0; in-seq)")(
      "total-len", Int(0, kMaxCpTokens), "tokens to split (token-balanced)")(
      "impl", ImplValue(), "in-seq plan built by ref (the reference) or fast (cpu_fast/, identical output)")(
      "json", po::bool_switch(), "print JSON (SGLang field names) instead of a table");
  DeclareSplitOwnerFlags(flags);
  DeclareMaxMemoryFlag(flags);
}

// The flags each mode reads; another mode's flag given is refused by name.
const std::vector<std::pair<std::string, std::vector<std::string>>>& ModeFlags() {
  static const auto* modes = new std::vector<std::pair<std::string, std::vector<std::string>>>{
      {"in-seq", {"cp-size", "cp-rank", "page-size", "extend-lens", "prefix-lens", "impl"}},
      {"round-robin", {"cp-size", "cp-rank", "extend-lens", "impl"}},  // --impl: accepted by every mode (one
      {"token-balanced", {"cp-size", "total-len", "impl"}},            // build serves them all)
      {"owners",
       {"cp-size", "cp-rank", "page-size", "extend-lens", "prefix-lens", "impl", "out-cache-loc", "extend-num-tokens"}},
  };
  return *modes;
}

Status Run(const Flags& flags, std::ostream& out) {
  const std::string& mode = flags.String("mode");
  for (const auto& [name, reads] : ModeFlags()) {
    if (name != mode) continue;
    std::vector<std::string> applies = reads;
    applies.insert(applies.end(), {"mode", "json", "max-memory"});
    KVSHARD_RETURN_IF_ERROR(flags.OnlyApplying(applies, "--mode " + mode));
  }
  if (mode == "round-robin") return RunRoundRobin(flags, out);
  if (mode == "token-balanced") return RunTokenBalanced(flags, out);
  if (mode == "owners") return RunSplitOwners(flags, out);
  return RunInSeq(flags, out);
}

}  // namespace

Command SplitCommand() {
  return {"split", "CP split plans: in-seq zigzag batch plan, round-robin q lengths, token-balanced split",
          "--cp-size INT --page-size INT --extend-lens INT,... [--prefix-lens INT,...] [--cp-rank INT] [--json]\n"
          "  [--max-memory BYTES]\n"
          "--mode round-robin --cp-size INT --cp-rank INT --extend-lens INT,... [--json]\n"
          "--mode token-balanced --cp-size INT --total-len INT [--json]\n"
          "--mode owners --cp-size INT --page-size INT --extend-lens INT,... [--prefix-lens INT,...] [--cp-rank INT]\n"
          "  [--out-cache-loc INT,... [--extend-num-tokens INT]] [--json]",
          DeclareFlags, Run};
}

}  // namespace kvshard::cli
