// kvshard split --mode owners: which CP rank computes every extent page (the derived build_in_seq_page_compute_owners
// behind build_flat_page_owner_plan) and, given --out-cache-loc, the direct-write locs of --cp-rank.
#include "cli/split_owners.h"

#include <algorithm>
#include <optional>
#include <ostream>

#include "cli/cli_util.h"
#include "replay/cp_results.h"
#include "cli/memory_limit.h"
#include "replay/results.h"

namespace kvshard::cli {
namespace {

void PrintTable(const CPSharedKVBatchPlan& p, const std::vector<Int64List>& owners, const Json& dw, std::ostream& out) {
  out << "page compute owners: cp_size=" << p.cp_size << " page_size=" << p.page_size << " batch_size=" << p.batch_size
      << " (extent page -> the rank computing and writing it)\n";
  for (int64_t q = 0; q < p.batch_size; ++q) {
    const int64_t first = p.request_prefix_lens[q] / p.page_size;
    out << "  req " << q << ": pages [" << first << "," << first + p.request_padded_pages[q] << ") owners "
        << ListText(owners[q]) << "\n";
  }
  if (dw.is_null()) return;
  const Int64List logical = dw.at("cp_local_out_cache_loc").get<Int64List>();
  out << "direct write (cp_rank " << p.cp_rank << "): " << logical.size() << " locs\n"
      << "  cp_local_out_cache_loc=" << ListText(logical) << "\n"
      << "  cp_local_physical_out_cache_loc=" << ListText(dw.at("cp_local_physical_out_cache_loc").get<Int64List>())
      << "\n";
}

}  // namespace

void DeclareSplitOwnerFlags(po::options_description& flags) {
  flags.add_options()("out-cache-loc", IntList()->AllowEmpty(),
                      "logical KV locs of every batch row (owners: direct-write locs)")(
      "extend-num-tokens", NonNegative(), "static padded rows: trailing out-cache-loc padding allowed up to it");
}

Status RunSplitOwners(const Flags& flags, std::ostream& out) {
  KVSHARD_RETURN_IF_ERROR(flags.Require({"cp-size", "page-size", "extend-lens"}));
  const std::vector<int64_t>& extend = flags.IntList("extend-lens");
  if (flags.Has("extend-num-tokens") && !flags.Has("out-cache-loc")) {
    return InvalidArgument("--extend-num-tokens: applies only with --out-cache-loc (it bounds that list's padding)");
  }
  const MemoryBudget budget = Budget(flags);
  KVSHARD_RETURN_IF_ERROR(budget.PageOwners("--extend-lens", static_cast<int64_t>(extend.size()),
                                            TotalPages(extend, flags.Int("page-size")), flags.Int("cp-size")));
  if (flags.Has("out-cache-loc")) {
    KVSHARD_RETURN_IF_ERROR(
        budget.DirectWriteLocs("--out-cache-loc", static_cast<int64_t>(flags.IntList("out-cache-loc").size())));
  }
  StatusOr<replay::InSeqSplit> split =
      replay::BuildInSeqSplit(extend, PrefixLens(flags, extend.size()), flags.Int("page-size"), flags.Int("cp-size"),
                              flags.Int("cp-rank"), ImplFlag(flags));
  if (!split.ok()) return CpModelError(split.status());
  StatusOr<Json> j = replay::PageOwnersJson(*split);
  if (!j.ok()) return CpModelError(j.status());
  Json dw;
  if (flags.Has("out-cache-loc")) {
    const std::optional<int64_t> static_rows =
        flags.Has("extend-num-tokens") ? std::optional<int64_t>(flags.Int("extend-num-tokens")) : std::nullopt;
    KVSHARD_ASSIGN_OR_RETURN(
        dw, replay::DirectWriteJson(*split, flags.IntList("out-cache-loc"), static_rows, "--out-cache-loc"));
  }
  if (!flags.Bool("json")) {
    PrintTable(split->plan, j->at("request_page_compute_owners").get<std::vector<Int64List>>(), dw, out);
    return Status::Ok();
  }
  if (!dw.is_null()) {
    (*j)["cp_local_out_cache_loc"] = dw["cp_local_out_cache_loc"];
    (*j)["cp_local_physical_out_cache_loc"] = dw["cp_local_physical_out_cache_loc"];
  }
  PrintJson(*j, out);
  return Status::Ok();
}

}  // namespace kvshard::cli
