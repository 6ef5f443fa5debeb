// kvshard split: SGLang's CP split plans for one rank: the in-seq zigzag batch plan (CPSharedKVBatchPlan and
// its communication metadata), round-robin q lengths, or the token-balanced split list.
#include <iomanip>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/cp_cli_util.h"
#include "core/cp_plan_json.h"
#include "cpu_ref/cp_split.h"

namespace kvshard::cli {
namespace {

void PrintPlanTable(const CPSharedKVBatchPlan& p, const NSAContextParallelMetadata& m) {
  std::cout << "in-seq split: cp_size=" << p.cp_size << " cp_rank=" << p.cp_rank << " page_size=" << p.page_size
            << " batch_size=" << p.batch_size << " compute_padding=" << (p.compute_padding_enabled ? "on" : "off")
            << "\n";
  std::cout << std::setw(5) << "req" << std::setw(5) << "seg" << std::setw(6) << "rank" << std::setw(8) << "valid"
            << std::setw(16) << "valid pages" << std::setw(9) << "compute" << std::setw(16) << "compute pages"
            << "  here\n";
  const int64_t segments = 2 * p.cp_size;
  for (int64_t q = 0; q < p.batch_size; ++q) {
    for (int64_t s = 0; s < segments; ++s) {
      const int64_t rank = s < p.cp_size ? s : segments - 1 - s;
      const auto pages = [](int64_t a, int64_t b) { return "[" + std::to_string(a) + "," + std::to_string(b) + ")"; };
      std::cout << std::setw(5) << q << std::setw(5) << s << std::setw(6) << rank << std::setw(8)
                << p.request_split_lists[q][s] << std::setw(16)
                << pages(p.request_segment_page_starts[q][s], p.request_segment_page_ends[q][s]) << std::setw(9)
                << p.request_compute_split_lists[q][s] << std::setw(16)
                << pages(p.request_compute_segment_page_starts[q][s], p.request_compute_segment_page_ends[q][s])
                << (rank == p.cp_rank ? "  *" : "") << "\n";
    }
    std::cout << "  req " << q << ": extend=" << p.request_extend_lens[q] << " prefix=" << p.request_prefix_lens[q]
              << " kv_len_prev/next=" << p.request_kv_len_prev[q] << "/" << p.request_kv_len_next[q]
              << " last token: rank " << p.request_last_token_owner[q] << " local offset "
              << p.request_last_token_local_offset[q] << "\n";
  }
  std::cout << "per_rank_actual_token=" << ListText(m.per_rank_actual_token) << " max_rank_len=" << m.max_rank_token()
            << " (* = segments computed by cp_rank " << p.cp_rank << ")\n";
}

Status RunInSeq(const po::variables_map& vm, bool json) {
  KVSHARD_ASSIGN_OR_RETURN(int64_t cp_size, IntFlag(vm, "cp-size"));
  KVSHARD_ASSIGN_OR_RETURN(int64_t cp_rank, IntFlag(vm, "cp-rank"));
  KVSHARD_ASSIGN_OR_RETURN(int64_t page_size, IntFlag(vm, "page-size"));
  KVSHARD_ASSIGN_OR_RETURN(std::vector<int64_t> extend, IntListFlag(vm, "extend-lens"));
  KVSHARD_ASSIGN_OR_RETURN(std::vector<int64_t> prefix, IntListFlagOrZeros(vm, "prefix-lens", extend.size()));
  StatusOr<CPSharedKVBatchPlan> plan = ref::BuildBatchPageAlignedInSeqSplitPlan(extend, prefix, page_size, cp_size, cp_rank);
  if (!plan.ok()) return CpModelError(plan.status());
  StatusOr<NSAContextParallelMetadata> m = ref::BuildBatchMetadataFromPlan(*plan);
  if (!m.ok()) return CpModelError(m.status());
  if (json) {
    Json j = ToJson(*plan);
    j["nsa_cp_metadata"] = ToJson(*m);
    PrintJson(j);
  } else {
    PrintPlanTable(*plan, *m);
  }
  return Status::Ok();
}

Status RunRoundRobin(const po::variables_map& vm, bool json) {
  KVSHARD_ASSIGN_OR_RETURN(int64_t cp_size, IntFlag(vm, "cp-size"));
  KVSHARD_ASSIGN_OR_RETURN(int64_t cp_rank, IntFlag(vm, "cp-rank"));
  KVSHARD_ASSIGN_OR_RETURN(std::vector<int64_t> extend, IntListFlag(vm, "extend-lens"));
  StatusOr<ref::RoundRobinQSeqs> r = ref::RoundRobinSplitQSeqs(extend, cp_size, cp_rank);
  if (!r.ok()) return CpModelError(r.status());
  if (json) {
    Json j;
    j["q_lens"] = r->q_lens;
    j["bs_idx"] = r->bs_idx;
    PrintJson(j);
  } else {
    std::cout << "round-robin split: cp_size=" << cp_size << " cp_rank=" << cp_rank << " (token t -> rank t % "
              << cp_size << ")\nq_lens=" << ListText(r->q_lens) << "\nbs_idx=" << ListText(r->bs_idx) << "\n";
  }
  return Status::Ok();
}

Status RunTokenBalanced(const po::variables_map& vm, bool json) {
  KVSHARD_ASSIGN_OR_RETURN(int64_t cp_size, IntFlag(vm, "cp-size"));
  KVSHARD_ASSIGN_OR_RETURN(int64_t total_len, IntFlag(vm, "total-len"));
  StatusOr<Int64List> s = ref::BuildTokenBalancedInSeqSplitList(total_len, cp_size);
  if (!s.ok()) return CpModelError(s.status());
  if (json) {
    Json j;
    j["split_list"] = *s;
    PrintJson(j);
  } else {
    std::cout << "token-balanced split: total_len=" << total_len << " cp_size=" << cp_size
              << "\nsplit_list=" << ListText(*s) << "\n";
  }
  return Status::Ok();
}

Status Run(const std::vector<std::string>& args, bool* help) {
  po::options_description desc("split flags");
  desc.add_options()
      ("mode", po::value<std::string>()->default_value("in-seq"), "in-seq | round-robin | token-balanced")
      ("cp-size", po::value<std::string>(), "N, context-parallel ranks")
      ("cp-rank", po::value<std::string>()->default_value("0"), "rank whose plan to build")
      ("page-size", po::value<std::string>(), "ps, tokens per physical page (in-seq)")
      ("extend-lens", po::value<std::string>(), "comma-separated extend (new) tokens per request")
      ("prefix-lens", po::value<std::string>(), "comma-separated cached prefix tokens per request (default 0s)")
      ("total-len", po::value<std::string>(), "tokens to split (token-balanced)")
      ("json", po::bool_switch(), "print JSON (SGLang field names) instead of a table");
  KVSHARD_ASSIGN_OR_RETURN(
      po::variables_map vm,
      ParseFlags("split",
                 "--cp-size N --page-size P --extend-lens a,b [--prefix-lens x,y] [--cp-rank R] [--json]\n"
                 "       kvshard split --mode round-robin --cp-size N --cp-rank R --extend-lens a,b [--json]\n"
                 "       kvshard split --mode token-balanced --cp-size N --total-len L [--json]",
                 desc, args, help));
  if (*help) return Status::Ok();
  const std::string mode = vm["mode"].as<std::string>();
  const bool json = vm["json"].as<bool>();
  if (mode == "in-seq") return RunInSeq(vm, json);
  if (mode == "round-robin") return RunRoundRobin(vm, json);
  if (mode == "token-balanced") return RunTokenBalanced(vm, json);
  return InvalidArgument("--mode: must be in-seq, round-robin or token-balanced, got '", mode, "'");
}

}  // namespace

int RunSplit(const std::vector<std::string>& args) {
  bool help = false;
  Status s = Run(args, &help);
  return s.ok() ? 0 : Fail(s);
}

}  // namespace kvshard::cli
