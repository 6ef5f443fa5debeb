// kvshard alloc: replays an allocator script through the reference rotated owner-classed allocator.
#include <algorithm>
#include <ostream>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/memory_limit.h"
#include "core/gather_plan.h"
#include "core/pool_json.h"
#include "cpu_ref/allocator.h"

namespace kvshard::cli {
namespace {

void PrintTable(const AllocScript& script, const std::vector<AllocOpResult>& results, std::ostream& out) {
  out << "shard_size=" << script.shard_size << " page_size=" << script.page_size
      << " pages_per_rank=" << script.pages_per_rank << " need_sort=" << (script.need_sort ? "true" : "false") << "\n";
  out << Col(4) << "op" << Col(12) << "kind" << Col(10) << "result" << Col(12) << "available" << Col(12) << "aggregate"
      << "  class_free_page_counts\n";
  for (size_t k = 0; k < results.size(); ++k) {
    const AllocOpResult& r = results[k];
    const char* outcome = r.kind != AllocOpKind::kAlloc ? "-" : r.ok ? "ok" : "deferred";
    out << Col(4) << k << Col(12) << AllocOpName(r.kind) << Col(10) << outcome << Col(12) << r.available_size << Col(12)
        << r.aggregate_free_size << "  " << ListText(r.class_free_page_counts) << "\n";
    for (size_t i = 0; i < r.pages.size(); ++i) {
      out << "      request " << i << ": base " << r.rotation_bases[i] << ", pages " << ListText(r.pages[i]) << "\n";
    }
  }
}

void DeclareFlags(po::options_description& flags) {
  flags.add_options()("script", File(),
                      "allocator script (JSON: shard_size, page_size, pages_per_rank, need_sort, ops); "
                      "- reads standard input")("json", po::bool_switch(),
                                                "print JSON {\"results\": [...]} instead of a table");
  DeclareMaxMemoryFlag(flags);
}

// Bytes held per byte of the script while it is read: the text, its JSON tree and the AllocScript.
constexpr int64_t kBytesPerInputByte = 32;
// Bytes per logical page of the allocator (free and release lists, allocated flags): an upper estimate.
constexpr int64_t kAllocatorBytesPerPage = 48;
// Bytes per integer of the results (class counts, bases, pages), with the vectors' slack.
constexpr int64_t kResultValueBytes = 16;

// The memory the script implies, checked before the allocator is built: the allocator's tables and every op's
// result (N class counts per op, and an alloc's new pages, at most the pool's); --json is written per op.
Status CheckScriptMemory(const AllocScript& s, const MemoryBudget& budget) {
  const int64_t pool_pages = SatMul(s.shard_size, s.pages_per_rank + 1);
  int64_t values = 0;
  for (const AllocOp& op : s.ops) {
    values = SatAdd(values, s.shard_size + 4);
    if (op.kind != AllocOpKind::kAlloc) continue;
    int64_t pages = 0;
    for (size_t i = 0; i < op.alloc.seq_lens.size(); ++i) {
      const int64_t prefix = i < op.alloc.prefix_lens.size() ? op.alloc.prefix_lens[i] : 0;
      pages = SatAdd(pages,
                     std::max<int64_t>(PositionPages(op.alloc.seq_lens[i], s.page_size) - prefix / s.page_size, 0) + 4);
    }
    values = SatAdd(values, std::min(pages, SatAdd(pool_pages, 4 * op.alloc.seq_lens.size())));
  }
  return budget.Check(
      "ops", "allocator and its results",
      {{pool_pages, "logical pages", kAllocatorBytesPerPage}, {values, "result values", kResultValueBytes}});
}

Status RunScript(const Flags& flags, std::ostream& out) {
  KVSHARD_ASSIGN_OR_RETURN(Json json, flags.ReadJson("script", kBytesPerInputByte));
  KVSHARD_ASSIGN_OR_RETURN(AllocScript script, AllocScriptFromJson(json));
  json = Json();
  KVSHARD_RETURN_IF_ERROR(CheckScriptMemory(script, Budget(flags)));
  KVSHARD_ASSIGN_OR_RETURN(std::vector<AllocOpResult> results, ref::RunAllocScript(script));
  if (flags.Bool("json")) {  // written per op: the same bytes as PrintJson of {"results": [...]}
    JsonObjectWriter writer(out);
    writer.ArrayField("results", results.size(), [&](size_t k) { return AllocOpResultToJson(results[k]); });
    writer.End();
  } else {
    PrintTable(script, results, out);
  }
  return Status::Ok();
}

// Errors about the script's contents name the flag: "--script: ops[3].need_srot: unknown key".
Status Run(const Flags& flags, std::ostream& out) { return FileError("script", RunScript(flags, out)); }

}  // namespace

Command AllocCommand() {
  return {"alloc", "replay an allocator script through the rotated owner-classed allocator",
          "--script FILE [--json] [--max-memory BYTES]", DeclareFlags, Run};
}

}  // namespace kvshard::cli
