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

// Bytes per segment of the in-memory plan and metadata (the in-seq mode's estimate).
constexpr int64_t kPlanBytesPerSegment = 192;
// Bytes per extent page of the owner plan: the flat list, the per-request copy, their JSON values and text.
constexpr int64_t kBytesPerOwnerPage = 96;
// Bytes per out_cache_loc row: the input list, the split copies (logical, physical) and their JSON.
constexpr int64_t kBytesPerLoc = 160;

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
  const int64_t ps = std::max<int64_t>(flags.Int("page-size"), 1);
  int64_t pages = 0;
  for (int64_t e : extend) pages = e > 0 && pages < (int64_t{1} << 50) ? pages + (e + ps - 1) / ps : pages;
  const int64_t cp_size = std::max<int64_t>(flags.Int("cp-size"), 1);
  const int64_t segments = static_cast<int64_t>(extend.size()) > (int64_t{1} << 40) / (2 * cp_size)
                               ? (int64_t{1} << 40)
                               : static_cast<int64_t>(extend.size()) * 2 * cp_size;
  KVSHARD_RETURN_IF_ERROR(
      CheckMemory("--extend-lens", "split plan", segments, "segments", kPlanBytesPerSegment, MaxMemory(flags)));
  KVSHARD_RETURN_IF_ERROR(
      CheckMemory("--extend-lens", "page owner plan", pages, "pages", kBytesPerOwnerPage, MaxMemory(flags)));
  if (flags.Has("out-cache-loc")) {
    KVSHARD_RETURN_IF_ERROR(CheckMemory("--out-cache-loc", "direct-write locs",
                                        static_cast<int64_t>(flags.IntList("out-cache-loc").size()), "rows",
                                        kBytesPerLoc, MaxMemory(flags)));
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
