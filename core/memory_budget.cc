// Memory estimates and the one-line refusal they print.
#include "core/memory_budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace kvshard {
namespace {

// The bytes each kind of table holds per entry (upper estimates; docs/RELIABILITY.md "Limits" says how they were
// measured). A CP plan's segment: the plan's per-segment tables and the rerange tables, with the per-request lists
// spread over a request's 2N segments; its JSON on top (written field by field; the whole tree took ~715 B).
constexpr int64_t kPlanBytesPerSegment = 192, kJsonBytesPerSegment = 128;
// An extent page of the owner plan: the flat list, the per-request copy, their JSON values and text.
constexpr int64_t kBytesPerOwnerPage = 96;
// An out_cache_loc row: the input list, the split copies (logical, physical) and their JSON.
constexpr int64_t kBytesPerLoc = 160;
// A row of the round-robin split: bs_idx, its JSON value and its dumped text.
constexpr int64_t kRoundRobinBytesPerRow = 48;
// A rerange source row: the list, the rank-major intermediate, its JSON value and the stack nlohmann's destructor
// builds (55 B measured at 61 M rows); a row of the GPU path: the gathered buffer, its byte copy, the kernel output,
// its int64 copy and the reference source rows.
constexpr int64_t kSourceRowBytes = 64, kGpuBytesPerRow = 40;
// A gather plan's send row (the plan's, another for a device plan, and the JSON value and text), send page (N *
// block_pages of them) and request page (each mapped once: the plan, the reference's page map, the device copy and
// the JSON), and page_pos entry (N * (pages_per_rank + 2): the dense table translate reads, and the fast path's).
constexpr int64_t kRowBytes = 8, kDeviceRowBytes = 8, kJsonRowBytes = 64;
constexpr int64_t kSendPageBytes = 16, kMappedPageBytes = 96, kJsonPageBytes = 160, kPagePosBytes = 24;
// A placed slot: the slot, its owner, local index, mask and filter_local entry with the vectors' slack, and its
// JSON values and text (50 B and 157 B were measured).
constexpr int64_t kSlotBytes = 64, kJsonSlotBytes = 192;
// A computed int64 value: the list, a tensor copy, its JSON value and the stack nlohmann's destructor builds.
constexpr int64_t kValueBytes = 48;

}  // namespace

std::string FormatBytes(long double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  int u = 0;
  while (bytes >= 1024 && u < 8) {
    bytes /= 1024;
    ++u;
  }
  char buf[64];
  if (bytes == std::floor(bytes)) {
    std::snprintf(buf, sizeof(buf), "%.0Lf %s", bytes, kUnits[u]);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1Lf %s", bytes, kUnits[u]);
  }
  return buf;
}

Status CheckMemory(std::string_view field, std::string_view what, int64_t count, std::string_view unit,
                   int64_t bytes_per, int64_t max_memory, std::string_view cap) {
  // The test first: a check within the budget (one per record line) builds no term and no string.
  if (count <= 0 || bytes_per <= 0 ||
      static_cast<long double>(count) * static_cast<long double>(bytes_per) <= static_cast<long double>(max_memory)) {
    return Status::Ok();
  }
  return CheckMemory(field, what, {{count, std::string(unit), bytes_per}}, max_memory, cap);
}

Status CheckMemory(std::string_view field, std::string_view what, const std::vector<MemoryTerm>& terms,
                   int64_t max_memory, std::string_view cap) {
  long double need = 0;
  for (const MemoryTerm& t : terms) {
    if (t.count <= 0 || t.bytes_per <= 0) continue;
    need += static_cast<long double>(t.count) * static_cast<long double>(t.bytes_per);
  }
  if (need <= static_cast<long double>(max_memory)) return Status::Ok();
  std::string parts;  // the terms, for the error only (a check runs for every record line)
  for (const MemoryTerm& t : terms) {
    if (t.count <= 0 || t.bytes_per <= 0) continue;
    parts += StrCat(parts.empty() ? "" : " + ", t.count, " ", t.unit, " x ", t.bytes_per, " B");
  }
  return InvalidArgument(
      field, ": the ", what, " would need ", FormatBytes(need), " (", parts, "), over ",
      cap.empty() ? "--max-memory " + FormatBytes(static_cast<long double>(max_memory)) : std::string(cap));
}

int64_t SatMul(int64_t a, int64_t b) {
  constexpr int64_t kCap = int64_t{1} << 62;
  if (a <= 0 || b <= 0) return 0;
  return a > kCap / b ? kCap : a * b;
}

int64_t SatAdd(int64_t a, int64_t b) {
  constexpr int64_t kCap = int64_t{1} << 62;
  return a > kCap - b ? kCap : a + b;
}

static_assert(sizeof(WorkloadRequest) == kHeldRequestBytes, "kHeldRequestBytes is a WorkloadRequest's size");

int64_t TotalTokens(const std::vector<int64_t>& lens) {
  int64_t total = 0;
  for (int64_t e : lens) total = SatAdd(total, std::max<int64_t>(e, 0));
  return total;
}

int64_t TotalPages(const std::vector<int64_t>& lens, int64_t page_size) {
  page_size = std::max<int64_t>(page_size, 1);
  int64_t pages = 0;
  for (int64_t e : lens) pages = SatAdd(pages, e > 0 ? e / page_size + (e % page_size != 0) : 0);
  return pages;
}

int64_t CpSegments(int64_t batch, int64_t cp_size) { return SatMul(batch, SatMul(2, std::max<int64_t>(cp_size, 1))); }

MemoryBudget MemoryBudget::Share(int parts, std::string_view by) const {
  if (parts <= 1) return *this;
  MemoryBudget share(max_memory_ / parts);
  share.cap_ = StrCat(cap_.empty() ? "--max-memory " + FormatBytes(static_cast<long double>(max_memory_)) : cap_, " / ",
                      by, " ", parts, " = ", FormatBytes(static_cast<long double>(share.max_memory_)));
  return share;
}

Status MemoryBudget::Check(const std::string& field, const std::string& what,
                           const std::vector<MemoryTerm>& terms) const {
  return CheckMemory(field, what, terms, max_memory_, cap_);
}

Status MemoryBudget::Check(const std::string& field, const std::string& what, int64_t count, const std::string& unit,
                           int64_t bytes_per) const {
  return CheckMemory(field, what, count, unit, bytes_per, max_memory_, cap_);
}

Status MemoryBudget::SplitPlan(const std::string& field, int64_t batch, int64_t cp_size, bool json) const {
  return Check(field, json ? "split plan and its JSON" : "split plan", CpSegments(batch, cp_size), "segments",
               kPlanBytesPerSegment + (json ? kJsonBytesPerSegment : 0));
}

Status MemoryBudget::PageOwners(const std::string& field, int64_t batch, int64_t pages, int64_t cp_size) const {
  KVSHARD_RETURN_IF_ERROR(SplitPlan(field, batch, cp_size, false));
  return Check(field, "page owner plan", pages, "pages", kBytesPerOwnerPage);
}

Status MemoryBudget::DirectWriteLocs(const std::string& field, int64_t rows) const {
  return Check(field, "direct-write locs", rows, "rows", kBytesPerLoc);
}

Status MemoryBudget::RoundRobinSplit(const std::string& field, int64_t tokens, int64_t cp_size) const {
  cp_size = std::max<int64_t>(cp_size, 1);
  return Check(field, "round-robin split", tokens / cp_size + (tokens % cp_size != 0), "rows", kRoundRobinBytesPerRow);
}

Status MemoryBudget::Rerange(const std::string& field, int64_t batch, int64_t tokens, int64_t page_size,
                             int64_t cp_size, bool source_rows, bool device_rows) const {
  const int64_t segments = CpSegments(batch, cp_size);
  KVSHARD_RETURN_IF_ERROR(Check(field, "rerange plan", segments, "segments", kPlanBytesPerSegment));
  // Every segment pads to at most one more page.
  const int64_t rows = SatAdd(tokens, SatMul(segments, std::max<int64_t>(page_size, 1)));
  if (source_rows) KVSHARD_RETURN_IF_ERROR(Check(field, "rerange source rows", rows, "rows", kSourceRowBytes));
  if (device_rows)
    KVSHARD_RETURN_IF_ERROR(Check(field, "rerange rows on the GPU path", tokens, "rows", kGpuBytesPerRow));
  return Status::Ok();
}

Status MemoryBudget::GatherPlan(const std::string& field, const ExtendBatch& b, bool device, bool json) const {
  if (!ValidateExtendBatch(b).ok()) return Status::Ok();
  const int64_t n = b.shard_size, ps = b.page_size;
  int64_t block_pages = 0, pages = 0;
  for (const ExtendRequest& r : b.requests) {
    block_pages = SatAdd(block_pages, (r.prefix_len / ps + n - 1) / n);
    pages = SatAdd(pages, static_cast<int64_t>(r.pages.size()));
  }
  const int64_t send_pages = SatMul(n, block_pages), rows = SatMul(send_pages, ps);
  if (rows > b.max_prefix_tokens) return Status::Ok();  // refused by the model before it allocates
  const int64_t row_bytes = kRowBytes + (device ? kDeviceRowBytes : 0) + (json ? kJsonRowBytes : 0);
  const int64_t page_bytes = (device ? 2 : 1) * kSendPageBytes + (json ? kJsonPageBytes : 0);
  return Check(field, "gather plan",
               {{rows, "send rows", row_bytes},
                {send_pages, "send pages", page_bytes},
                {pages, "request pages", kMappedPageBytes + (json ? kJsonPageBytes : 0)},
                {SatMul(n, SatAdd(b.pages_per_rank, 2)), "page_pos entries", kPagePosBytes}});
}

Status MemoryBudget::Placement(const std::string& field, int64_t slots, bool json) const {
  return Check(field, "placement of the slots", slots, "slots", kSlotBytes + (json ? kJsonSlotBytes : 0));
}

Status MemoryBudget::ValueList(const std::string& field, const std::string& what, int64_t values) const {
  return Check(field, what, values, "values", kValueBytes);
}

LineCheck MemoryBudget::Lines() const { return LineMemoryCheck(max_memory_, cap_); }

WorkloadLimits MemoryBudget::Workload() const { return WorkloadMemoryLimits(max_memory_, cap_); }

LineCheck LineMemoryCheck(int64_t max_memory, std::string cap) {
  return [max_memory, cap = std::move(cap)](int64_t line_bytes) {
    return CheckMemory("record", "line held in memory", line_bytes, "line bytes", kLineBytesPerByte, max_memory, cap);
  };
}

WorkloadLimits WorkloadMemoryLimits(int64_t max_memory, std::string cap) {
  WorkloadLimits limits;
  limits.line = LineMemoryCheck(max_memory, cap);
  limits.held = [max_memory, cap = std::move(cap)](int64_t requests, int64_t hashes) {
    return CheckMemory("requests", "workload held in memory",
                       {{requests, "requests", kHeldRequestBytes}, {hashes, "block hashes", kHeldHashBytes}},
                       max_memory, cap);
  };
  return limits;
}

}  // namespace kvshard
