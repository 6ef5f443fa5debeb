// kvshard place: the placement bijection for a list of slots, on the reference or the GPU (or both, diffed).
#include <fstream>
#include <iomanip>
#include <sstream>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/parse.h"
#include "cpu_ref/placement.h"
#ifdef KVSHARD_HAVE_CUDA
#include "gpu/placement.h"
#endif

namespace kvshard::cli {
namespace {

StatusOr<std::vector<int64_t>> ReadLocsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("--locs-file: cannot open '", path, "'");
  std::stringstream buf;
  buf << in.rdbuf();
  std::string text = buf.str();
  for (char& c : text) {
    if (c == '\n' || c == ' ' || c == '\t' || c == '\r') c = ',';
  }
  std::string squeezed;
  for (char c : text) {
    if (c == ',' && (squeezed.empty() || squeezed.back() == ',')) continue;
    squeezed += c;
  }
  if (!squeezed.empty() && squeezed.back() == ',') squeezed.pop_back();
  return ParseInt64List(squeezed, "--locs-file");
}

Json ToJson(const ref::PlacementResult& r) {
  Json j;
  j["owner"] = r.owner;
  j["local_index"] = r.local_index;
  j["local_mask"] = r.local_mask;
  j["filter_local"] = r.filter_local;
  return j;
}

void PrintTable(const std::vector<int64_t>& locs, const ref::PlacementResult& r, const PlacementSpec& spec,
                int64_t rank) {
  std::cout << "shard_size=" << spec.shard_size << " page_size=" << spec.page_size << " rank=" << rank << "\n";
  std::cout << std::setw(16) << "loc" << std::setw(8) << "owner" << std::setw(16) << "local_index" << std::setw(8)
            << "local" << "\n";
  for (size_t i = 0; i < locs.size(); ++i) {
    std::cout << std::setw(16) << locs[i] << std::setw(8) << r.owner[i] << std::setw(16) << r.local_index[i]
              << std::setw(8) << (r.local_mask[i] ? "yes" : "-") << "\n";
  }
  std::cout << "filter_local(rank " << rank << "): [";
  for (size_t i = 0; i < r.filter_local.size(); ++i) std::cout << (i ? "," : "") << r.filter_local[i];
  std::cout << "]\n";
}


Status Run(const std::vector<std::string>& args, bool* help) {
  po::options_description desc("place flags");
  desc.add_options()
      ("shard-size", po::value<std::string>()->default_value("4"), "N, ranks in the shard group")
      ("page-size", po::value<std::string>()->default_value("16"), "ps, token slots per physical page")
      ("rank", po::value<std::string>()->default_value("0"), "rank whose local_mask / filter_local to report")
      ("locs", po::value<std::string>(), "comma-separated logical token slots, e.g. 1,2,3")
      ("locs-file", po::value<std::string>(), "file of slots (comma or whitespace separated), instead of --locs")
      ("backend", po::value<std::string>()->default_value("ref"), "ref | gpu | diff (run both, exit 1 on mismatch)")
      ("json", po::bool_switch(), "print JSON instead of a table");
  KVSHARD_ASSIGN_OR_RETURN(po::variables_map vm,
                           ParseFlags("place", "--locs 1,2,3 [--shard-size N] [--page-size P] [--rank R] [--json]",
                                      desc, args, help));
  if (*help) return Status::Ok();
  PlacementSpec spec;
  KVSHARD_ASSIGN_OR_RETURN(spec.shard_size, IntFlag(vm, "shard-size"));
  KVSHARD_ASSIGN_OR_RETURN(spec.page_size, IntFlag(vm, "page-size"));
  KVSHARD_ASSIGN_OR_RETURN(int64_t rank, IntFlag(vm, "rank"));
  if (vm.count("locs") && vm.count("locs-file")) return InvalidArgument("--locs: give --locs or --locs-file, not both");
  std::vector<int64_t> locs;
  if (vm.count("locs-file")) {
    KVSHARD_ASSIGN_OR_RETURN(locs, ReadLocsFile(vm["locs-file"].as<std::string>()));
  } else {
    KVSHARD_ASSIGN_OR_RETURN(locs, IntListFlag(vm, "locs"));
  }
  if (Status s = ValidatePlacementSpec(spec); !s.ok()) return FlagError(s);
  KVSHARD_ASSIGN_OR_RETURN(Backend backend, BackendFlag(vm));
  auto ref_result = ref::PlaceLocs(spec, rank, locs);
  if (!ref_result.ok()) return FlagError(ref_result.status());
  ref::PlacementResult result = *ref_result;
#ifdef KVSHARD_HAVE_CUDA
  if (backend != Backend::kRef) {
    KVSHARD_ASSIGN_OR_RETURN(gpu::GpuPlacementResult g, gpu::RunPlacement(spec, rank, locs));
    if (backend == Backend::kDiff) {
      KVSHARD_RETURN_IF_ERROR(DiffLists("owner", g.owner, result.owner));
      KVSHARD_RETURN_IF_ERROR(DiffLists("local_index", g.local_index, result.local_index));
      KVSHARD_RETURN_IF_ERROR(DiffLists("local_mask", std::vector<int64_t>(g.local_mask.begin(), g.local_mask.end()),
                                   std::vector<int64_t>(result.local_mask.begin(), result.local_mask.end())));
      KVSHARD_RETURN_IF_ERROR(DiffLists("filter_local", g.filter_local, result.filter_local));
    } else {
      result = {g.owner, g.local_index, g.local_mask, g.filter_local};
    }
  }
#else
  (void)backend;
#endif
  if (vm["json"].as<bool>()) {
    PrintJson(ToJson(result));
  } else {
    PrintTable(locs, result, spec, rank);
  }
  return Status::Ok();
}

}  // namespace

int RunPlace(const std::vector<std::string>& args) {
  bool help = false;
  Status s = Run(args, &help);
  return s.ok() ? 0 : Fail(s);
}

}  // namespace kvshard::cli
