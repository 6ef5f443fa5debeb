// Memory estimates and the one-line refusal they print.
#include "core/memory_budget.h"

#include <cmath>
#include <cstdio>

namespace kvshard {

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

Status CheckMemory(const std::string& field, const std::string& what, int64_t count, const std::string& unit,
                   int64_t bytes_per, int64_t max_memory) {
  return CheckMemory(field, what, {{count, unit, bytes_per}}, max_memory);
}

Status CheckMemory(const std::string& field, const std::string& what, const std::vector<MemoryTerm>& terms,
                   int64_t max_memory) {
  long double need = 0;
  std::string parts;
  for (const MemoryTerm& t : terms) {
    if (t.count <= 0 || t.bytes_per <= 0) continue;
    need += static_cast<long double>(t.count) * static_cast<long double>(t.bytes_per);
    parts += StrCat(parts.empty() ? "" : " + ", t.count, " ", t.unit, " x ", t.bytes_per, " B");
  }
  if (need <= static_cast<long double>(max_memory)) return Status::Ok();
  return InvalidArgument(field, ": the ", what, " would need ", FormatBytes(need), " (", parts, "), over --max-memory ",
                         FormatBytes(static_cast<long double>(max_memory)));
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

LineCheck LineMemoryCheck(int64_t max_memory) {
  return [max_memory](int64_t line_bytes) {
    return CheckMemory("record", "line held in memory", line_bytes, "line bytes", kLineBytesPerByte, max_memory);
  };
}

WorkloadLimits WorkloadMemoryLimits(int64_t max_memory) {
  WorkloadLimits limits;
  limits.line = LineMemoryCheck(max_memory);
  limits.held = [max_memory](int64_t requests, int64_t hashes) {
    return CheckMemory("requests", "workload held in memory",
                       {{requests, "requests", kHeldRequestBytes}, {hashes, "block hashes", kHeldHashBytes}},
                       max_memory);
  };
  return limits;
}

}  // namespace kvshard
