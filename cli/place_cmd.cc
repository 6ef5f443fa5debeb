// kvshard place: the placement bijection for a list of slots, on the reference or the GPU (or both, diffed).
#include <algorithm>
#include <ostream>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/memory_limit.h"
#include "replay/results.h"
#include "core/parse.h"
#include "cpu_ref/placement.h"
#ifdef KVSHARD_HAVE_CUDA
#include "gpu/placement.h"
#endif

namespace kvshard::cli {
namespace {

// The slots of --locs-file (comma or whitespace separated; "-" reads standard input), counted and checked
// against --max-memory before they are parsed (the text is held twice while it is split).
StatusOr<std::vector<int64_t>> ReadLocsFile(const Flags& flags) {
  KVSHARD_ASSIGN_OR_RETURN(std::string text, flags.ReadText("locs-file", 2));
  std::string squeezed;
  for (char c : text) {
    if (c == '\n' || c == ' ' || c == '\t' || c == '\r') c = ',';
    if (c == ',' && (squeezed.empty() || squeezed.back() == ',')) continue;
    squeezed += c;
  }
  text = std::string();
  if (!squeezed.empty() && squeezed.back() == ',') squeezed.pop_back();
  if (squeezed.empty()) return InvalidArgument("--locs-file: must list at least one value");
  const int64_t slots = 1 + static_cast<int64_t>(std::count(squeezed.begin(), squeezed.end(), ','));
  KVSHARD_RETURN_IF_ERROR(Budget(flags).Placement("--locs-file", slots, flags.Bool("json")));
  return ParseInt64List(squeezed, "--locs-file");
}

void PrintTable(const std::vector<int64_t>& locs, const PlacementResult& r, const PlacementSpec& spec, int64_t rank,
                std::ostream& out) {
  out << "shard_size=" << spec.shard_size << " page_size=" << spec.page_size << " rank=" << rank << "\n";
  out << Col(16) << "loc" << Col(8) << "owner" << Col(16) << "local_index" << Col(8) << "local"
      << "\n";
  for (size_t i = 0; i < locs.size(); ++i) {
    out << Col(16) << locs[i] << Col(8) << r.owner[i] << Col(16) << r.local_index[i] << Col(8)
        << (r.local_mask[i] ? "yes" : "-") << "\n";
  }
  out << "filter_local(rank " << rank << "): " << ListText(r.filter_local) << "\n";
}

void DeclareFlags(po::options_description& flags) {
  flags.add_options()("shard-size", Int(1, kMaxShardSize)->default_value(4), "N, ranks in the shard group")(
      "page-size", Int(1, kMaxPageSize)->default_value(16), "ps, token slots per physical page")(
      "shard-rank", NonNegative()->default_value(0), "rank whose local_mask / filter_local to report")(
      "locs", IntList(), "logical token slots, e.g. 1,2,3")(
      "locs-file", File(), "file of slots (comma or whitespace separated), instead of --locs; - reads stdin")(
      "backend", BackendValue(), "ref, gpu or diff (run both, exit 1 on the first mismatch)")(
      "json", po::bool_switch(), "print JSON instead of a table");
  DeclareMaxMemoryFlag(flags);
}

Status Run(const Flags& flags, std::ostream& out) {
  const PlacementSpec spec{.shard_size = flags.Int("shard-size"), .page_size = flags.Int("page-size")};
  const int64_t rank = flags.Int("shard-rank");
  const bool from_file = flags.Has("locs-file");
  if (from_file && flags.Has("locs")) return InvalidArgument("--locs: give --locs or --locs-file, not both");
  if (!from_file) KVSHARD_RETURN_IF_ERROR(flags.Require({"locs"}));
  std::vector<int64_t> locs;
  if (from_file) {
    KVSHARD_ASSIGN_OR_RETURN(locs, ReadLocsFile(flags));
  } else {
    locs = flags.IntList("locs");
    KVSHARD_RETURN_IF_ERROR(Budget(flags).Placement("--locs", static_cast<int64_t>(locs.size()), flags.Bool("json")));
  }
  StatusOr<PlacementResult> ref_result = ref::PlaceLocs(spec, rank, locs);
  if (!ref_result.ok()) {
    return FlagError(ref_result.status(), {{"rank", "shard-rank"}, {"locs", from_file ? "locs-file" : "locs"}});
  }
  KVSHARD_ASSIGN_OR_RETURN(Backend backend, BackendFlag(flags));
  PlacementResult result = *std::move(ref_result);
#ifdef KVSHARD_HAVE_CUDA
  if (backend != Backend::kRef) {
    KVSHARD_ASSIGN_OR_RETURN(PlacementResult g, gpu::RunPlacement(spec, rank, locs));
    if (backend == Backend::kDiff) {
      KVSHARD_RETURN_IF_ERROR(DiffLists("owner", g.owner, result.owner));
      KVSHARD_RETURN_IF_ERROR(DiffLists("local_index", g.local_index, result.local_index));
      KVSHARD_RETURN_IF_ERROR(DiffLists("local_mask", std::vector<int64_t>(g.local_mask.begin(), g.local_mask.end()),
                                        std::vector<int64_t>(result.local_mask.begin(), result.local_mask.end())));
      KVSHARD_RETURN_IF_ERROR(DiffLists("filter_local", g.filter_local, result.filter_local));
    } else {
      result = std::move(g);
    }
  }
#else
  (void)backend;
#endif
  if (flags.Bool("json")) {
    PrintJson(replay::PlacementJson(result), out);
  } else {
    PrintTable(locs, result, spec, rank, out);
  }
  return Status::Ok();
}

}  // namespace

Command PlaceCommand() {
  return {"place",
          "map token slots to (owner rank, local row) under page-interleaved sharding",
          "--locs INT,... | --locs-file FILE [--shard-size INT] [--page-size INT] [--shard-rank INT] "
          "[--backend ref|gpu|diff] [--json] [--max-memory BYTES]",
          DeclareFlags,
          Run,
          {{"rank", "shard-rank"}}};
}

}  // namespace kvshard::cli
