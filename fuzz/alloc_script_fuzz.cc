// Fuzz target: the allocator-script JSON reader (`alloc --script`, core/pool_json.h) and the reference
// allocator run on what it accepts. Oracle: no crash or sanitizer report; a read script writes back to itself;
// every op's reported counts agree with each other and an alloc's pages are distinct non-trash pages; the
// command keeps the bad-input contract.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <unordered_set>

#include "core/json.h"
#include "core/pool_json.h"
#include "cpu_ref/allocator.h"
#include "fuzz/cli_check.h"
#include "fuzz/fuzz_util.h"

namespace kvshard::fuzz {
namespace {

void CheckResults(const AllocScript& script, const std::vector<AllocOpResult>& results) {
  FUZZ_ASSERT(results.size() == script.ops.size(), "one result per op");
  const int64_t n = script.shard_size, ps = script.page_size;
  for (size_t k = 0; k < results.size(); ++k) {
    const AllocOpResult& r = results[k];
    FUZZ_ASSERT(r.kind == script.ops[k].kind, "ops[", k, "]: result kind");
    FUZZ_ASSERT(static_cast<int64_t>(r.class_free_page_counts.size()) == n, "ops[", k, "]: one count per class");
    const int64_t sum = std::accumulate(r.class_free_page_counts.begin(), r.class_free_page_counts.end(), int64_t{0});
    const int64_t least = *std::min_element(r.class_free_page_counts.begin(), r.class_free_page_counts.end());
    FUZZ_ASSERT(least >= 0 && sum <= n * script.pages_per_rank, "ops[", k, "]: free counts in [0, pool]");
    FUZZ_ASSERT(r.aggregate_free_size == ps * sum, "ops[", k, "]: aggregate_free_size = ps * sum(counts)");
    FUZZ_ASSERT(r.available_size == n * ps * least, "ops[", k, "]: available_size = N * ps * min(counts)");
    if (r.kind != AllocOpKind::kAlloc || !r.ok) continue;
    const AllocBatch& b = script.ops[k].alloc;
    FUZZ_ASSERT(r.pages.size() == b.seq_lens.size() && r.rotation_bases.size() == b.seq_lens.size(), "ops[", k,
                "]: pages and bases per request");
    std::unordered_set<int64_t> seen;
    for (size_t i = 0; i < r.pages.size(); ++i) {
      const int64_t want = PositionPages(b.seq_lens[i], ps) - b.prefix_lens[i] / ps;
      FUZZ_ASSERT(static_cast<int64_t>(r.pages[i].size()) == want, "ops[", k, "]: request ", i, " got ",
                  r.pages[i].size(), " pages, needs ", want);
      FUZZ_ASSERT(r.rotation_bases[i] >= 0 && r.rotation_bases[i] < n, "ops[", k, "]: resolved base in [0, N)");
      for (int64_t page : r.pages[i]) {
        FUZZ_ASSERT(page >= n && page < n * (script.pages_per_rank + 1), "ops[", k, "]: page ", page,
                    " outside the allocatable pool");
        FUZZ_ASSERT(seen.insert(page).second, "ops[", k, "]: page ", page, " handed out twice");
      }
    }
  }
}

void Check(const std::string& text) {
  const StatusOr<Json> json = ParseJsonStrict(text, "--script");
  if (json.ok()) {
    const StatusOr<AllocScript> script = AllocScriptFromJson(*json);
    if (script.ok()) {
      const StatusOr<AllocScript> again = AllocScriptFromJson(AllocScriptToJson(*script));
      FUZZ_ASSERT(again.ok() && *again == *script, "AllocScriptToJson does not read back: ", again.status().ToString());
      const StatusOr<std::vector<AllocOpResult>> results = ref::RunAllocScript(*script);
      if (results.ok()) CheckResults(*script, *results);
    }
  }
  RunCliChecked({"alloc", "--script", "-", "--json"}, text);
  RunCliChecked({"alloc", "--script", "-"}, text);
}

}  // namespace
}  // namespace kvshard::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvshard::fuzz::Check(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
