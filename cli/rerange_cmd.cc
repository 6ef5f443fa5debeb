// kvshard rerange: where every output row of the CP batch rerange comes from in the padded all-gather
// (rank-major blocks of max_rank_token rows; rank r's block holds its valid rows, per request segment r then
// 2N-1-r), as SGLang's _torch_batch_in_seq_all_gather_rerange reads them.
#include <iomanip>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/cp_cli_util.h"
#include "cpu_ref/cp_data.h"
#include "cpu_ref/cp_split.h"
#ifdef KVSHARD_HAVE_CUDA
#include <cstring>

#include "gpu/cp_plan_ops.h"
#endif

namespace kvshard::cli {
namespace {

Status Run(const std::vector<std::string>& args, bool* help) {
  po::options_description desc("rerange flags");
  desc.add_options()
      ("cp-size", po::value<std::string>(), "N, context-parallel ranks")
      ("page-size", po::value<std::string>(), "ps, tokens per physical page")
      ("extend-lens", po::value<std::string>(), "comma-separated extend (new) tokens per request")
      ("prefix-lens", po::value<std::string>(), "comma-separated cached prefix tokens per request (default 0s)")
      ("backend", po::value<std::string>()->default_value("ref"),
       "ref | gpu (fused rerange kernel on a buffer whose rows carry their index) | diff (both; exit 1 on a mismatch)")
      ("json", po::bool_switch(), "print JSON instead of a table");
  KVSHARD_ASSIGN_OR_RETURN(
      po::variables_map vm,
      ParseFlags("rerange", "--cp-size N --page-size P --extend-lens a,b [--prefix-lens x,y] [--json]", desc, args,
                 help));
  if (*help) return Status::Ok();
  KVSHARD_ASSIGN_OR_RETURN(int64_t cp_size, IntFlag(vm, "cp-size"));
  KVSHARD_ASSIGN_OR_RETURN(int64_t page_size, IntFlag(vm, "page-size"));
  KVSHARD_ASSIGN_OR_RETURN(std::vector<int64_t> extend, IntListFlag(vm, "extend-lens"));
  KVSHARD_ASSIGN_OR_RETURN(std::vector<int64_t> prefix, IntListFlagOrZeros(vm, "prefix-lens", extend.size()));
  // The layout is the same whichever rank plans it; rank 0's plan is used.
  StatusOr<CPSharedKVBatchPlan> plan = ref::BuildBatchPageAlignedInSeqSplitPlan(extend, prefix, page_size, cp_size, 0);
  if (!plan.ok()) return CpModelError(plan.status());
  StatusOr<NSAContextParallelMetadata> m = ref::BuildBatchMetadataFromPlan(*plan);
  if (!m.ok()) return CpModelError(m.status());
  const int64_t max_rank_token = m->max_rank_token();
  const RerangeTables valid = BuildRerangeTables(plan->request_split_lists, cp_size);
  StatusOr<std::vector<ref::RowCopy>> copies = ref::BatchRerangeCopies(plan->request_split_lists, cp_size, max_rank_token);
  if (!copies.ok()) return CpModelError(copies.status());
  StatusOr<Int64List> rows = ref::BatchRerangeSourceRows(plan->request_split_lists, cp_size, max_rank_token);
  if (!rows.ok()) return CpModelError(rows.status());
  KVSHARD_ASSIGN_OR_RETURN(Backend backend, BackendFlag(vm));
#ifdef KVSHARD_HAVE_CUDA
  if (backend != Backend::kRef) {
    // Row i of the gathered buffer holds the int64 i; the kernel's output row j then names its source row.
    Int64List gathered(cp_size * max_rank_token);
    for (size_t i = 0; i < gathered.size(); ++i) gathered[i] = static_cast<int64_t>(i);
    std::vector<uint8_t> bytes(gathered.size() * 8);
    std::memcpy(bytes.data(), gathered.data(), bytes.size());
    KVSHARD_ASSIGN_OR_RETURN(std::vector<uint8_t> out,
                             gpu::RunBatchRerange(bytes, 8, plan->request_split_lists, cp_size, max_rank_token));
    Int64List got(out.size() / 8);
    std::memcpy(got.data(), out.data(), out.size());
    if (backend == Backend::kDiff) KVSHARD_RETURN_IF_ERROR(DiffLists("source_rows", got, *rows));
    *rows = std::move(got);
  }
#else
  (void)backend;
#endif
  if (vm["json"].as<bool>()) {
    Json j;
    j["max_rank_token"] = max_rank_token;
    j["per_rank_tokens"] = valid.per_rank_tokens;
    j["source_rows"] = *rows;
    j["compute_padding_enabled"] = plan->compute_padding_enabled;
    j["per_rank_actual_token"] = m->per_rank_actual_token;
    PrintJson(j);
    return Status::Ok();
  }
  std::cout << "rerange: cp_size=" << cp_size << " page_size=" << page_size << " max_rank_token=" << max_rank_token
            << (plan->compute_padding_enabled ? " (from compute splits)" : "") << "\n";
  std::cout << std::setw(6) << "rank" << std::setw(14) << "block rows" << std::setw(12) << "valid" << std::setw(12)
            << "padding" << "\n";
  for (int64_t r = 0; r < cp_size; ++r) {
    std::cout << std::setw(6) << r << std::setw(14)
              << ("[" + std::to_string(r * max_rank_token) + "," + std::to_string((r + 1) * max_rank_token) + ")")
              << std::setw(12) << valid.per_rank_tokens[r] << std::setw(12) << max_rank_token - valid.per_rank_tokens[r]
              << "\n";
  }
  std::cout << "output rows <- gathered rows\n";
  for (const ref::RowCopy& c : *copies) {
    std::cout << "  [" << c.dst_row << "," << c.dst_row + c.rows << ") <- [" << c.src_row << "," << c.src_row + c.rows
              << ")\n";
  }
  return Status::Ok();
}

}  // namespace

int RunRerange(const std::vector<std::string>& args) {
  bool help = false;
  Status s = Run(args, &help);
  return s.ok() ? 0 : Fail(s);
}

}  // namespace kvshard::cli
