// The CP argument checks; their messages are compared byte for byte by goldens and the SGLang parity test.
#include "core/cp_limits.h"

namespace kvshard {

Status ValidateCpSize(int64_t cp_size) {
  if (cp_size <= 0) return InvalidArgument("cp_size: must be positive, got ", cp_size);
  if (cp_size > kMaxCpSize) return InvalidArgument("cp_size: must be at most ", kMaxCpSize, ", got ", cp_size);
  return Status::Ok();
}

Status ValidateCpRank(int64_t cp_rank, int64_t cp_size) {
  if (cp_rank < 0 || cp_rank >= cp_size) {
    return InvalidArgument("cp_rank: must be in [0, ", cp_size, "), got ", cp_rank);
  }
  return Status::Ok();
}

Status ValidatePageSize(int64_t page_size) {
  if (page_size <= 0) return InvalidArgument("page_size: must be positive, got ", page_size);
  if (page_size > kMaxCpPageSize) {
    return InvalidArgument("page_size: must be at most ", kMaxCpPageSize, ", got ", page_size);
  }
  return Status::Ok();
}

}  // namespace kvshard
