// kvshard alloc: replays an allocator script through the reference rotated owner-classed allocator.
#include <iomanip>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/trace_json.h"
#include "cpu_ref/allocator.h"

namespace kvshard::cli {
namespace {

std::string ListText(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

void PrintTable(const AllocScript& script, const std::vector<AllocOpResult>& results) {
  std::cout << "shard_size=" << script.shard_size << " page_size=" << script.page_size
            << " pages_per_rank=" << script.pages_per_rank << " need_sort=" << (script.need_sort ? "true" : "false")
            << "\n";
  std::cout << std::setw(4) << "op" << std::setw(12) << "kind" << std::setw(10) << "result" << std::setw(12)
            << "available" << std::setw(12) << "aggregate" << "  class_free_page_counts\n";
  for (size_t k = 0; k < results.size(); ++k) {
    const AllocOpResult& r = results[k];
    const char* outcome = r.kind != AllocOpKind::kAlloc ? "-" : r.ok ? "ok" : "deferred";
    std::cout << std::setw(4) << k << std::setw(12) << AllocOpName(r.kind) << std::setw(10) << outcome
              << std::setw(12) << r.available_size << std::setw(12) << r.aggregate_free_size << "  "
              << ListText(r.class_free_page_counts) << "\n";
    for (size_t i = 0; i < r.pages.size(); ++i) {
      std::cout << "      request " << i << ": base " << r.rotation_bases[i] << ", pages " << ListText(r.pages[i])
                << "\n";
    }
  }
}

Status Run(const std::vector<std::string>& args, bool* help) {
  po::options_description desc("alloc flags");
  desc.add_options()
      ("script", po::value<std::string>(), "allocator script (JSON: shard_size, page_size, pages_per_rank, "
                                           "need_sort, ops)")
      ("json", po::bool_switch(), "print JSON {\"results\": [...]} instead of a table");
  KVSHARD_ASSIGN_OR_RETURN(po::variables_map vm, ParseFlags("alloc", "--script FILE [--json]", desc, args, help));
  if (*help) return Status::Ok();
  KVSHARD_ASSIGN_OR_RETURN(std::string path, RequiredString(vm, "script"));
  auto json = ReadJsonFile(path);
  if (!json.ok()) return InvalidArgument("--script: ", json.status().message());
  KVSHARD_ASSIGN_OR_RETURN(AllocScript script, AllocScriptFromJson(*json));
  KVSHARD_ASSIGN_OR_RETURN(std::vector<AllocOpResult> results, ref::RunAllocScript(script));
  if (vm["json"].as<bool>()) {
    Json out;
    out["results"] = Json::array();
    for (const AllocOpResult& r : results) out["results"].push_back(AllocOpResultToJson(r));
    PrintJson(out);
  } else {
    PrintTable(script, results);
  }
  return Status::Ok();
}

}  // namespace

int RunAlloc(const std::vector<std::string>& args) {
  bool help = false;
  Status s = Run(args, &help);
  return s.ok() ? 0 : Fail(s);
}

}  // namespace kvshard::cli
