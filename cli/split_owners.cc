// kvshard split --mode owners: which CP rank computes every extent page (the derived build_in_seq_page_compute_owners
// behind build_flat_page_owner_plan) and, given --out-cache-loc, the direct-write locs of --cp-rank.
#include "cli/split_owners.h"

#include <algorithm>
#include <optional>
#include <ostream>

#include "cli/cli_util.h"
#include "cli/memory_limit.h"
#include "cli/results.h"
#include "cpu_ref/cp_shared_kv.h"

namespace kvshard::cli {
namespace {

// Bytes per segment of the in-memory plan and metadata (the in-seq mode's estimate).
constexpr int64_t kPlanBytesPerSegment = 192;
// Bytes per extent page of the owner plan: the flat list, the per-request copy, their JSON values and text.
constexpr int64_t kBytesPerOwnerPage = 96;
// Bytes per out_cache_loc row: the input list, the split copies (logical, physical) and their JSON.
constexpr int64_t kBytesPerLoc = 160;

// The direct-write locs of one rank, or the model's error with the first foreign loc named.
struct DirectWrite {
  Int64List logical;
  Int64List physical;
};

StatusOr<DirectWrite> RunDirectWrite(const Flags& flags, const InSeqSplit& split) {
  ref::CpSharedKVForwardBatch b;
  b.uses_cp_shared_kv = true;
  b.nsa_cp_metadata = split.metadata;
  b.cp_shared_kv_layout = ref::CpSharedKVLayout{split.plan.cp_size, split.plan.cp_rank, split.plan.page_size};
  b.out_cache_loc = flags.IntList("out-cache-loc");
  if (flags.Has("extend-num-tokens")) b.extend_num_tokens = flags.Int("extend-num-tokens");
  StatusOr<std::optional<Int64List>> physical = ref::GetCpSharedKVLocalPhysicalOutCacheLoc(&b);
  if (!physical.ok()) {
    const std::string message = physical.status().message();
    if (message.find("reason=local_loc_owner_mismatch") == std::string::npos) {
      return InvalidArgument("--out-cache-loc: ", message);
    }
    // Say which loc: the first of this rank's split locs on a page another rank owns.
    ref::CpSharedKVForwardBatch probe = b;
    probe.cp_shared_kv_layout = ref::CpSharedKVLayout{1, 0, split.plan.page_size};  // owns everything
    const Int64List local = **ref::GetCpSharedKVLocalOutCacheLoc(&probe);
    for (int64_t loc : local) {
      if (loc > 0 && !b.cp_shared_kv_layout->OwnedByThisRank(loc)) {
        return InvalidArgument("--out-cache-loc: ", message, " (first foreign loc ", loc, ": page ",
                               loc / split.plan.page_size, " is owned by rank ", b.cp_shared_kv_layout->OwnerOf(loc),
                               ")");
      }
    }
    return InvalidArgument("--out-cache-loc: ", message);
  }
  return DirectWrite{b.cp_local_out_cache_loc.value(), physical->value()};
}

// Per-request owners (request q's extent pages start at prefix_q / ps).
std::vector<Int64List> RequestOwners(const CPSharedKVBatchPlan& p, const Int64List& flat) {
  std::vector<Int64List> owners;
  size_t k = 0;
  for (int64_t q = 0; q < p.batch_size; ++q) {
    const size_t n = static_cast<size_t>(p.request_padded_pages[q]);
    owners.emplace_back(flat.begin() + k, flat.begin() + k + n);
    k += n;
  }
  return owners;
}

void PrintTable(const CPSharedKVBatchPlan& p, const std::vector<Int64List>& owners,
                const std::optional<DirectWrite>& dw, std::ostream& out) {
  out << "page compute owners: cp_size=" << p.cp_size << " page_size=" << p.page_size << " batch_size="
      << p.batch_size << " (extent page -> the rank computing and writing it)\n";
  for (int64_t q = 0; q < p.batch_size; ++q) {
    const int64_t first = p.request_prefix_lens[q] / p.page_size;
    out << "  req " << q << ": pages [" << first << "," << first + p.request_padded_pages[q] << ") owners "
        << ListText(owners[q]) << "\n";
  }
  if (!dw) return;
  out << "direct write (cp_rank " << p.cp_rank << "): " << dw->logical.size() << " locs\n"
      << "  cp_local_out_cache_loc=" << ListText(dw->logical) << "\n"
      << "  cp_local_physical_out_cache_loc=" << ListText(dw->physical) << "\n";
}

}  // namespace

void DeclareSplitOwnerFlags(po::options_description& flags) {
  flags.add_options()
      ("out-cache-loc", IntList()->AllowEmpty(), "logical KV locs of every batch row (owners: direct-write locs)")
      ("extend-num-tokens", NonNegative(), "static padded rows: trailing out-cache-loc padding allowed up to it");
}

Status RunSplitOwners(const Flags& flags, std::ostream& out) {
  KVSHARD_RETURN_IF_ERROR(flags.Require({"cp-size", "page-size", "extend-lens"}));
  const std::vector<int64_t>& extend = flags.IntList("extend-lens");
  const int64_t ps = std::max<int64_t>(flags.Int("page-size"), 1);
  int64_t pages = 0;
  for (int64_t e : extend) pages = e > 0 && pages < (int64_t{1} << 50) ? pages + (e + ps - 1) / ps : pages;
  const int64_t cp_size = std::max<int64_t>(flags.Int("cp-size"), 1);
  const int64_t segments = static_cast<int64_t>(extend.size()) > (int64_t{1} << 40) / (2 * cp_size)
                               ? (int64_t{1} << 40) : static_cast<int64_t>(extend.size()) * 2 * cp_size;
  KVSHARD_RETURN_IF_ERROR(
      CheckMemory("--extend-lens", "split plan", segments, "segments", kPlanBytesPerSegment, MaxMemory(flags)));
  KVSHARD_RETURN_IF_ERROR(
      CheckMemory("--extend-lens", "page owner plan", pages, "pages", kBytesPerOwnerPage, MaxMemory(flags)));
  if (flags.Has("out-cache-loc")) {
    KVSHARD_RETURN_IF_ERROR(CheckMemory("--out-cache-loc", "direct-write locs",
                                        static_cast<int64_t>(flags.IntList("out-cache-loc").size()), "rows",
                                        kBytesPerLoc, MaxMemory(flags)));
  }
  StatusOr<InSeqSplit> split = BuildInSeqSplit(extend, PrefixLens(flags, extend.size()), flags.Int("page-size"),
                                               flags.Int("cp-size"), flags.Int("cp-rank"), ImplFlag(flags));
  if (!split.ok()) return CpModelError(split.status());
  StatusOr<Int64List> flat = ref::BuildFlatPageOwnerPlan(split->plan);
  if (!flat.ok()) return CpModelError(flat.status());
  std::optional<DirectWrite> dw;
  if (flags.Has("out-cache-loc")) {
    StatusOr<DirectWrite> r = RunDirectWrite(flags, *split);
    if (!r.ok()) return r.status();
    dw = std::move(*r);
  }
  const std::vector<Int64List> owners = RequestOwners(split->plan, *flat);
  if (!flags.Bool("json")) {
    PrintTable(split->plan, owners, dw, out);
    return Status::Ok();
  }
  Json j = {{"cp_size", split->plan.cp_size}, {"cp_rank", split->plan.cp_rank}, {"page_size", split->plan.page_size},
            {"page_owner_plan", *flat}, {"request_page_compute_owners", owners}};
  if (dw) {
    j["cp_local_out_cache_loc"] = dw->logical;
    j["cp_local_physical_out_cache_loc"] = dw->physical;
  }
  PrintJson(j, out);
  return Status::Ok();
}

}  // namespace kvshard::cli
