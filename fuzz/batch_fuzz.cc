// Fuzz target: the extend-batch JSON reader (`gather-plan --batch`, core/pool_json.h) and the plans of what
// it accepts. Oracle: no crash or sanitizer report; a read batch writes back to itself; ref and fast plans
// agree (fuzz/gather_plan_check.h); the command keeps the bad-input contract and --impl fast prints the same.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/pool_json.h"
#include "fuzz/cli_check.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/gather_plan_check.h"

namespace kvshard::fuzz {
namespace {

void Check(const std::string& text) {
  const StatusOr<Json> json = ParseJsonStrict(text, "--batch");
  if (json.ok()) {
    const StatusOr<ExtendBatch> batch = ExtendBatchFromJson(*json);
    if (batch.ok()) {
      const StatusOr<ExtendBatch> again = ExtendBatchFromJson(ExtendBatchToJson(*batch));
      FUZZ_ASSERT(again.ok() && *again == *batch, "ExtendBatchToJson does not read back: ", again.status().ToString());
      // Translate the first slot of every request page, and one past the page_pos range.
      std::vector<int64_t> locs;
      for (const ExtendRequest& r : batch->requests) {
        for (int64_t page : r.pages) locs.push_back(page * batch->page_size);
      }
      CheckGatherPlan(*batch, locs);
    }
  }
  const CliRun ref = RunCliChecked({"gather-plan", "--batch", "-", "--json"}, text);
  const CliRun fast = RunCliChecked({"gather-plan", "--batch", "-", "--json", "--impl", "fast"}, text);
  FUZZ_ASSERT(SameRun(ref, fast), "gather-plan --impl fast differs from ref: exit ", ref.exit_code, " vs ",
              fast.exit_code, ": ", ref.err, " / ", fast.err);
  RunCliChecked({"gather-plan", "--batch", "-"}, text);
}

}  // namespace
}  // namespace kvshard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvshard::fuzz::Check(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
