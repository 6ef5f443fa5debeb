// kvshard gather-plan: the reference begin_shard_extend plan of an extend batch, and translate().
#include <ostream>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/memory_limit.h"
#include "replay/results.h"
#include "core/gather_plan.h"
#include "core/pool_json.h"
#include "cpu_ref/gather_plan.h"
#ifdef KVSHARD_HAVE_CUDA
#include "gpu/gather_plan.h"
#endif

namespace kvshard::cli {
namespace {

void PrintTable(const ExtendBatch& b, const GatherPlan& p, const std::vector<int64_t>& locs,
                const std::vector<int64_t>& rows, std::ostream& out) {
  out << "shard_size=" << b.shard_size << " page_size=" << b.page_size << " requests=" << b.requests.size()
      << "\nblock_pages=" << p.block_pages << " n_prefix_slots=" << p.n_prefix_slots
      << " chunk_base_page=" << p.chunk_base_page << " trash_page=" << p.trash_page << "\n\n";
  out << "prefix region (owner-major all-gather blocks; scratch page <- logical page / local page):\n";
  for (const RankSend& r : p.ranks) {
    out << "  rank " << r.rank << ":";
    for (size_t w = 0; w < r.send_local_pages.size(); ++w) {
      const int64_t lp = r.send_local_pages[w];
      out << "  " << r.rank * p.block_pages + static_cast<int64_t>(w) << "<-";
      if (lp == 0) {
        out << "pad";
      } else {
        out << lp * b.shard_size + r.rank << "/" << lp;
      }
    }
    out << "\n";
  }
  out << "\npage_pos (logical page -> absolute scratch page; all others -> trash page " << p.trash_page << "):\n";
  out << Col(14) << "page" << Col(14) << "scratch_page" << Col(10) << "region"
      << "\n";
  for (size_t i = 0; i < p.mapped_pages.size(); ++i) {
    out << Col(14) << p.mapped_pages[i] << Col(14) << p.mapped_scratch_pages[i] << Col(10)
        << (p.mapped_scratch_pages[i] < p.chunk_base_page ? "prefix" : "chunk") << "\n";
  }
  if (!locs.empty()) {
    out << "\ntranslate:\n"
        << Col(14) << "loc" << Col(14) << "scratch_row"
        << "\n";
    for (size_t i = 0; i < locs.size(); ++i) out << Col(14) << locs[i] << Col(14) << rows[i] << "\n";
  }
}

#ifdef KVSHARD_HAVE_CUDA
// The batch's plan built on the current GPU (reference-identical errors come back as the same Status).
StatusOr<GatherPlan> DevicePlan(const ExtendBatch& batch) {
  KVSHARD_RETURN_IF_ERROR(gpu::GatherPlanCanImplement(batch));
  ExtendBatch geometry = batch;
  geometry.requests.clear();
  KVSHARD_ASSIGN_OR_RETURN(auto planner, gpu::DeviceGatherPlanner::Create(geometry));
  KVSHARD_RETURN_IF_ERROR(planner->Upload(batch, nullptr));
  KVSHARD_RETURN_IF_ERROR(planner->Launch(0, nullptr));
  return planner->Download(nullptr);
}

// First differing field of two plans as a Mismatch.
Status DiffPlans(const GatherPlan& got, const GatherPlan& want) {
  KVSHARD_RETURN_IF_ERROR(DiffLists("block_pages", {got.block_pages}, {want.block_pages}));
  KVSHARD_RETURN_IF_ERROR(DiffLists("mapped_pages", got.mapped_pages, want.mapped_pages));
  KVSHARD_RETURN_IF_ERROR(DiffLists("page_pos", got.mapped_scratch_pages, want.mapped_scratch_pages));
  for (size_t r = 0; r < want.ranks.size() && r < got.ranks.size(); ++r) {
    const std::string rank = "ranks[" + std::to_string(r) + "]";
    KVSHARD_RETURN_IF_ERROR(
        DiffLists(rank + ".send_local_pages", got.ranks[r].send_local_pages, want.ranks[r].send_local_pages));
    KVSHARD_RETURN_IF_ERROR(DiffLists(rank + ".send_rows", got.ranks[r].send_rows, want.ranks[r].send_rows));
  }
  if (!(got == want)) return Mismatch("gather plan: scalar fields differ from the reference");
  return Status::Ok();
}
#endif

// Bytes held per byte of the batch file while it is read: the text, its JSON tree (a value per >= 2 bytes of
// text) and the ExtendBatch (an upper estimate; docs/RELIABILITY.md "Limits").
constexpr int64_t kBytesPerInputByte = 32;
void DeclareFlags(po::options_description& flags) {
  flags.add_options()("batch", File(),
                      "extend batch (JSON: shard_size, page_size, pages_per_rank (allocatable pages per rank, "
                      "excluding the trash page), max_prefix_tokens, chunk_tokens, requests); - reads standard "
                      "input")("translate", IntList(), "logical slots to translate to scratch rows")(
      "backend", BackendValue(),
      "ref, gpu (device plan build) or diff (both; exit 1 and the first differing field on a mismatch)")(
      "impl", ImplValue(), "host plan built by ref (the reference) or fast (cpu_fast/, identical output)")(
      "json", po::bool_switch(), "print JSON instead of tables");
  DeclareMaxMemoryFlag(flags);
}

Status RunBatch(const Flags& flags, std::ostream& out) {
  KVSHARD_ASSIGN_OR_RETURN(Json json, flags.ReadJson("batch", kBytesPerInputByte));
  const std::vector<int64_t> locs = flags.Has("translate") ? flags.IntList("translate") : std::vector<int64_t>{};
  KVSHARD_ASSIGN_OR_RETURN(ExtendBatch batch, ExtendBatchFromJson(json));
  json = Json();  // the tree is not needed past here
  KVSHARD_RETURN_IF_ERROR(
      Budget(flags).GatherPlan("--batch", batch, flags.String("backend") != "ref", flags.Bool("json")));
  KVSHARD_ASSIGN_OR_RETURN(Backend backend, BackendFlag(flags));
  KVSHARD_ASSIGN_OR_RETURN(replay::PlanAndRows built,
                           replay::BuildGatherPlanAndRows(batch, locs, "--translate", ImplFlag(flags)));
  GatherPlan& plan = built.plan;
#ifdef KVSHARD_HAVE_CUDA
  if (backend != Backend::kRef) {
    KVSHARD_ASSIGN_OR_RETURN(GatherPlan device_plan, DevicePlan(batch));
    if (backend == Backend::kDiff) KVSHARD_RETURN_IF_ERROR(DiffPlans(device_plan, plan));
    plan = std::move(device_plan);
  }
#else
  (void)backend;
#endif
  KVSHARD_ASSIGN_OR_RETURN(std::vector<int64_t> rows, ref::Translate(plan, locs, "--translate"));
  if (flags.Bool("json")) {
    PrintJson(replay::GatherPlanJson(plan, rows, flags.Has("translate")), out);
  } else {
    PrintTable(batch, plan, locs, rows, out);
  }
  return Status::Ok();
}

// Errors about the batch's contents name the flag: "--batch: requests[0].page: unknown key".
Status Run(const Flags& flags, std::ostream& out) { return FileError("batch", RunBatch(flags, out)); }

}  // namespace

Command GatherPlanCommand() {
  return {"gather-plan", "build a batch's owner-major gather plan and translate slots to scratch rows",
          "--batch FILE [--translate INT,...] [--backend ref|gpu|diff] [--json] [--max-memory BYTES]", DeclareFlags,
          Run};
}

}  // namespace kvshard::cli
