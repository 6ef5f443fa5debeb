// kvshard rerange: where every output row of the CP batch rerange comes from in the padded all-gather
// (rank-major blocks of max_rank_token rows; rank r's block holds its valid rows, per request segment r then
// 2N-1-r), as SGLang's _torch_batch_in_seq_all_gather_rerange reads them.
#include <algorithm>
#include <ostream>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/memory_limit.h"
#include "replay/results.h"
#include "core/cp_limits.h"
#include "cpu_ref/cp_data.h"
#ifdef KVSHARD_HAVE_CUDA
#include <cstring>

#include "gpu/cp_plan_ops.h"
#endif

namespace kvshard::cli {
namespace {

void DeclareFlags(po::options_description& flags) {
  flags.add_options()("cp-size", Int(1, kMaxCpSize), "N, context-parallel ranks")(
      "page-size", Int(1, kMaxCpPageSize), "ps, tokens per physical page")("extend-lens", IntList()->AllowEmpty(),
                                                                           "extend (new) tokens per request")(
      "prefix-lens", IntList(), "cached prefix tokens per request (default: all 0)")(
      "backend", BackendValue(),
      "ref, gpu (device rerange on a buffer whose rows carry their index) or diff (both; exit 1 on a mismatch)")(
      "impl", ImplValue(), "host plan built by ref (the reference) or fast (cpu_fast/, identical output)")(
      "json", po::bool_switch(), "print JSON instead of a table");
  DeclareMaxMemoryFlag(flags);
}

// The sizes --extend-lens implies, checked against --max-memory before the plan is built. The ref text
// and JSON outputs are streamed per segment, so only the plan (and the GPU path's row buffers) count.
Status CheckRerangeMemory(const Flags& flags, int64_t cp_size, const std::vector<int64_t>& extend, bool ref_backend) {
  return Budget(flags).Rerange("--extend-lens", static_cast<int64_t>(extend.size()), TotalTokens(extend),
                               flags.Int("page-size"), cp_size, /*source_rows=*/false, /*device_rows=*/!ref_backend);
}

// A list at depth 1 of nlohmann's dump(2) ("[]" when empty), written as produced.
template <typename Emit>
void WriteJsonList(std::ostream& out, bool empty, Emit emit) {
  if (empty) {
    out << "[]";
    return;
  }
  out << "[\n";
  bool first = true;
  emit([&](int64_t v) {
    out << (first ? "    " : ",\n    ") << v;
    first = false;
  });
  out << "\n  ]";
}

// `rerange --json` streamed: byte-identical to PrintJson(RerangeJson(r)), with source_rows written segment
// by segment from the copies instead of held (flat memory at any row count).
void PrintRerangeJsonStreamed(const replay::Rerange& r, const std::vector<ref::RowCopy>& copies, std::ostream& out) {
  const auto list = [&](const std::vector<int64_t>& v) {
    WriteJsonList(out, v.empty(), [&](auto put) {
      for (int64_t x : v) put(x);
    });
  };
  out << "{\n  \"max_rank_token\": " << r.max_rank_token << ",\n  \"per_rank_tokens\": ";
  list(r.per_rank_tokens);
  out << ",\n  \"source_rows\": ";
  WriteJsonList(out, copies.empty(), [&](auto put) {
    for (const ref::RowCopy& c : copies) {
      for (int64_t o = 0; o < c.rows; ++o) put(c.src_row + o);
    }
  });
  out << ",\n  \"compute_padding_enabled\": " << (r.plan.compute_padding_enabled ? "true" : "false")
      << ",\n  \"per_rank_actual_token\": ";
  list(r.per_rank_actual_token);
  out << "\n}\n";
}

Status Run(const Flags& flags, std::ostream& out) {
  KVSHARD_RETURN_IF_ERROR(flags.Require({"cp-size", "page-size", "extend-lens"}));
  const int64_t cp_size = flags.Int("cp-size"), page_size = flags.Int("page-size");
  const std::vector<int64_t>& extend = flags.IntList("extend-lens");
  const std::vector<int64_t> prefix = PrefixLens(flags, extend.size());
  // The size check is a flag check: it precedes the GPU check in BackendFlag.
  KVSHARD_RETURN_IF_ERROR(CheckRerangeMemory(flags, cp_size, extend, flags.String("backend") == "ref"));
  KVSHARD_ASSIGN_OR_RETURN(Backend backend, BackendFlag(flags));
  StatusOr<replay::Rerange> result = replay::BuildRerange(cp_size, page_size, extend, prefix, ImplFlag(flags),
                                                          /*with_source_rows=*/backend != Backend::kRef);
  if (!result.ok()) return CpModelError(result.status());
  const int64_t max_rank_token = result->max_rank_token;
#ifdef KVSHARD_HAVE_CUDA
  if (backend != Backend::kRef) {
    const Int64Table& splits = result->plan.request_split_lists;
    // Row i of the gathered buffer holds the int64 i; the kernel's output row j then names its source row.
    Int64List gathered(cp_size * max_rank_token);
    for (size_t i = 0; i < gathered.size(); ++i) gathered[i] = static_cast<int64_t>(i);
    std::vector<uint8_t> bytes(gathered.size() * 8);
    std::memcpy(bytes.data(), gathered.data(), bytes.size());
    KVSHARD_ASSIGN_OR_RETURN(std::vector<uint8_t> copied,
                             gpu::RunBatchRerange(bytes, 8, splits, cp_size, max_rank_token));
    Int64List got(copied.size() / 8);
    std::memcpy(got.data(), copied.data(), copied.size());
    if (backend == Backend::kDiff) KVSHARD_RETURN_IF_ERROR(DiffLists("source_rows", got, result->source_rows));
    result->source_rows = std::move(got);
  }
#else
  (void)backend;
#endif
  StatusOr<std::vector<ref::RowCopy>> copies =
      ref::BatchRerangeCopies(result->plan.request_split_lists, cp_size, max_rank_token);
  if (!copies.ok()) return CpModelError(copies.status());
  if (flags.Bool("json")) {
    if (backend == Backend::kRef) {
      PrintRerangeJsonStreamed(*result, *copies, out);
    } else {
      PrintJson(replay::RerangeJson(*result), out);
    }
    return Status::Ok();
  }
  out << "rerange: cp_size=" << cp_size << " page_size=" << page_size << " max_rank_token=" << max_rank_token
      << (result->plan.compute_padding_enabled ? " (from compute splits)" : "") << "\n";
  out << Col(6) << "rank" << Col(14) << "block rows" << Col(12) << "valid" << Col(12) << "padding"
      << "\n";
  for (int64_t r = 0; r < cp_size; ++r) {
    out << Col(6) << r << Col(14)
        << ("[" + std::to_string(r * max_rank_token) + "," + std::to_string((r + 1) * max_rank_token) + ")") << Col(12)
        << result->per_rank_tokens[r] << Col(12) << max_rank_token - result->per_rank_tokens[r] << "\n";
  }
  out << "output rows <- gathered rows\n";
  for (const ref::RowCopy& c : *copies) {
    out << "  [" << c.dst_row << "," << c.dst_row + c.rows << ") <- [" << c.src_row << "," << c.src_row + c.rows
        << ")\n";
  }
  return Status::Ok();
}

}  // namespace

Command RerangeCommand() {
  return {"rerange", "where each row of the CP batch rerange comes from in the padded all-gather",
          "--cp-size INT --page-size INT --extend-lens INT,... [--prefix-lens INT,...] [--backend ref|gpu|diff] "
          "[--json] [--max-memory BYTES]",
          DeclareFlags, Run};
}

}  // namespace kvshard::cli
