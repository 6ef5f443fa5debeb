// kvshard alloc: replays an allocator script through the reference rotated owner-classed allocator.
#include <iomanip>
#include <ostream>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/pool_json.h"
#include "cpu_ref/allocator.h"

namespace kvshard::cli {
namespace {

void PrintTable(const AllocScript& script, const std::vector<AllocOpResult>& results, std::ostream& out) {
  out << "shard_size=" << script.shard_size << " page_size=" << script.page_size
      << " pages_per_rank=" << script.pages_per_rank << " need_sort=" << (script.need_sort ? "true" : "false")
      << "\n";
  out << std::setw(4) << "op" << std::setw(12) << "kind" << std::setw(10) << "result" << std::setw(12)
      << "available" << std::setw(12) << "aggregate" << "  class_free_page_counts\n";
  for (size_t k = 0; k < results.size(); ++k) {
    const AllocOpResult& r = results[k];
    const char* outcome = r.kind != AllocOpKind::kAlloc ? "-" : r.ok ? "ok" : "deferred";
    out << std::setw(4) << k << std::setw(12) << AllocOpName(r.kind) << std::setw(10) << outcome << std::setw(12)
        << r.available_size << std::setw(12) << r.aggregate_free_size << "  " << ListText(r.class_free_page_counts)
        << "\n";
    for (size_t i = 0; i < r.pages.size(); ++i) {
      out << "      request " << i << ": base " << r.rotation_bases[i] << ", pages " << ListText(r.pages[i]) << "\n";
    }
  }
}

void DeclareFlags(po::options_description& flags) {
  flags.add_options()
      ("script", File(), "allocator script (JSON: shard_size, page_size, pages_per_rank, need_sort, ops); "
                         "- reads standard input")
      ("json", po::bool_switch(), "print JSON {\"results\": [...]} instead of a table");
}

Status Run(const Flags& flags, std::ostream& out) {
  KVSHARD_ASSIGN_OR_RETURN(Json json, flags.ReadJson("script"));
  KVSHARD_ASSIGN_OR_RETURN(AllocScript script, AllocScriptFromJson(json));
  KVSHARD_ASSIGN_OR_RETURN(std::vector<AllocOpResult> results, ref::RunAllocScript(script));
  if (flags.Bool("json")) {
    Json j;
    j["results"] = Json::array();
    for (const AllocOpResult& r : results) j["results"].push_back(AllocOpResultToJson(r));
    PrintJson(j, out);
  } else {
    PrintTable(script, results, out);
  }
  return Status::Ok();
}

}  // namespace

Command AllocCommand() {
  return {"alloc", "replay an allocator script through the rotated owner-classed allocator", "--script FILE [--json]",
          DeclareFlags, Run};
}

}  // namespace kvshard::cli
