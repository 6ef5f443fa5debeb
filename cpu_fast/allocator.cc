// Fast rotated owner-classed allocator. Class lists are stored reversed (head at back()) so that popping the
// head and prepending freed pages are both O(1) amortized; pass 1's simulated counts and start classes live in
// members reused by every call. Input checks and their messages are core/page_allocator.h's, as the reference's.
#include "cpu_fast/allocator.h"

#include <algorithm>
#include <functional>

#include "core/gather_plan.h"
#include "core/spec.h"

namespace kvshard::fast {
namespace {

// Floor of alloc_extend's simulated class counts: far below any real deficit (a batch's pages are < 2^48 each).
constexpr int64_t kSimFloor = -(int64_t{1} << 62);

}  // namespace

StatusOr<PageInterleaveAllocator> PageInterleaveAllocator::Create(const AllocatorConfig& config) {
  KVSHARD_RETURN_IF_ERROR(ValidateAllocatorConfig(config));
  return PageInterleaveAllocator(config);
}

PageInterleaveAllocator::PageInterleaveAllocator(const AllocatorConfig& config)
    : config_(config),
      free_(config.shard_size),
      release_(config.shard_size),
      allocated_(config.shard_size * (config.pages_per_rank + 1), 0),
      sim_(config.shard_size),
      starts_() {
  const int64_t n = config.shard_size;
  for (int64_t c = 0; c < n; ++c) {
    free_[c].reserve(config.pages_per_rank);
    for (int64_t i = config.pages_per_rank; i >= 1; --i) free_[c].push_back(i * n + c);
  }
  for (int64_t p = 0; p < n; ++p) allocated_[p] = 1;  // reserved trash pages are never free
}

StatusOr<bool> PageInterleaveAllocator::AllocExtend(const AllocBatch& batch, ExtendPages* out) {
  const int64_t n = config_.shard_size, ps = config_.page_size;
  const size_t reqs = batch.prefix_lens.size();
  KVSHARD_RETURN_IF_ERROR(ValidateAllocBatchLengths(batch));
  // Pass 1: validate, resolve new chains on the simulated counts, simulate every class's draw.
  for (int64_t c = 0; c < n; ++c) sim_[c] = ClassCount(c);
  out->rotation_bases.assign(batch.rotation_bases.begin(), batch.rotation_bases.end());
  starts_.resize(reqs);
  bool deferred = false;
  int64_t total_pages = 0;
  for (size_t i = 0; i < reqs; ++i) {
    const int64_t prefix_len = batch.prefix_lens[i];
    KVSHARD_ASSIGN_OR_RETURN(const int64_t new_pages, ExtendRequestNewPages(batch, i, ps));
    int64_t base = batch.rotation_bases[i];
    if (!IsValidRotationBase(base, n)) return RotationBaseError(batch, i, n);
    if (base == kNewChain) {
      base = static_cast<int64_t>(std::max_element(sim_.begin(), sim_.end()) - sim_.begin());
      out->rotation_bases[i] = base;
    }
    const int64_t prefix_pages = prefix_len / ps;
    if (config_.check_last_loc && prefix_pages > 0) {
      KVSHARD_RETURN_IF_ERROR(CheckLastLoc(batch, i, base, prefix_pages, config_));
    }
    const int64_t start = (base + prefix_pages) % n;
    starts_[i] = start;
    // Keep simulating past a deferral, as SGLang does: later null bases resolve on the simulated counts.
    // Counts saturate at kSimFloor so that no batch overflows them (SGLang's Python ints are unbounded).
    const int64_t q = new_pages / n, rem = new_pages % n;
    for (int64_t c = 0; c < n; ++c) sim_[c] = std::max(sim_[c] - q, kSimFloor);
    for (int64_t j = 0, c = start; j < rem; ++j, c = (c + 1 == n ? 0 : c + 1))
      sim_[c] = std::max(sim_[c] - 1, kSimFloor);
    if (!deferred) total_pages += new_pages;
    deferred = *std::min_element(sim_.begin(), sim_.end()) < 0;
  }
  if (deferred) return false;
  // need_sort: if any class's free list alone is shorter than its need, every class merges its release
  // list into its free list, sorted (SGLang's merge_and_sort_free runs over all classes at once).
  if (config_.need_sort) {
    bool short_class = false;
    for (int64_t c = 0; c < n; ++c) {
      short_class |= static_cast<int64_t>(free_[c].size()) < ClassCount(c) - sim_[c];
    }
    if (short_class) MergeAndSortAll();
  }
  // Pass 2: request by request, position-page j draws the head of class (start + j) % N.
  out->pages.resize(total_pages);
  out->offsets.resize(reqs + 1);
  int64_t* dst = out->pages.data();
  for (size_t i = 0; i < reqs; ++i) {
    out->offsets[i] = dst - out->pages.data();
    const int64_t new_pages = PositionPages(batch.seq_lens[i], ps) - batch.prefix_lens[i] / ps;
    int64_t c = starts_[i];
    for (int64_t j = 0; j < new_pages; ++j) {
      const int64_t page = free_[c].back();
      free_[c].pop_back();
      allocated_[page] = 1;
      *dst++ = page;
      c = (c + 1 == n ? 0 : c + 1);
    }
  }
  out->offsets[reqs] = total_pages;
  return true;
}

// Owner-plan mode: each new page from the class the caller names (e.g. its CP compute owner), no rotation.
StatusOr<bool> PageInterleaveAllocator::AllocExtendByClasses(const AllocBatch& batch,
                                                             const std::vector<std::vector<int64_t>>& page_classes,
                                                             ExtendPages* out) {
  const int64_t n = config_.shard_size, ps = config_.page_size;
  const size_t reqs = batch.prefix_lens.size();
  KVSHARD_RETURN_IF_ERROR(ValidateByClassesLengths(batch, page_classes.size()));
  std::vector<int64_t> need(static_cast<size_t>(n), 0);
  int64_t total_pages = 0;
  for (size_t i = 0; i < reqs; ++i) {
    KVSHARD_ASSIGN_OR_RETURN(const int64_t new_pages, ExtendRequestNewPages(batch, i, ps));
    KVSHARD_RETURN_IF_ERROR(ValidatePageClasses(page_classes[i], i, new_pages, n));
    for (int64_t c : page_classes[i]) ++need[c];
    total_pages += new_pages;
  }
  for (int64_t c = 0; c < n; ++c) {
    if (need[c] > ClassCount(c)) return false;  // defer the whole batch, state unchanged
  }
  if (config_.need_sort) {
    bool short_class = false;
    for (int64_t c = 0; c < n; ++c) short_class |= static_cast<int64_t>(free_[c].size()) < need[c];
    if (short_class) MergeAndSortAll();
  }
  out->rotation_bases.assign(batch.rotation_bases.begin(), batch.rotation_bases.end());
  out->pages.clear();
  out->pages.reserve(static_cast<size_t>(total_pages));
  out->offsets.assign(1, 0);
  for (size_t i = 0; i < reqs; ++i) {
    for (int64_t c : page_classes[i]) {
      const int64_t page = free_[c].back();
      free_[c].pop_back();
      allocated_[page] = 1;
      out->pages.push_back(page);
    }
    out->offsets.push_back(static_cast<int64_t>(out->pages.size()));
  }
  return true;
}

void PageInterleaveAllocator::MergeAndSortAll() {
  for (int64_t c = 0; c < config_.shard_size; ++c) {
    if (release_[c].empty()) continue;
    std::vector<int64_t>& f = free_[c];
    f.insert(f.end(), release_[c].begin(), release_[c].end());
    std::sort(f.begin(), f.end(), std::greater<int64_t>());  // reversed storage: smallest at back()
    release_[c].clear();
  }
}

void PageInterleaveAllocator::ApplyFree(const std::vector<int64_t>& locs) {
  const int64_t n = config_.shard_size, ps = config_.page_size;
  std::vector<int64_t> pages;
  pages.reserve(locs.size());
  for (int64_t loc : locs) pages.push_back(loc / ps);
  std::sort(pages.begin(), pages.end());
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  // Prepend each class's pages ascending: in reversed storage, push them descending.
  auto& lists = config_.need_sort ? release_ : free_;
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) {
    allocated_[*it] = 0;
    lists[*it % n].push_back(*it);
  }
}

Status PageInterleaveAllocator::Free(const std::vector<int64_t>& locs) {
  KVSHARD_RETURN_IF_ERROR(ValidateFreeLocs(locs, config_, allocated_));
  if (in_group_) {
    group_locs_.insert(group_locs_.end(), locs.begin(), locs.end());  // snapshot of the values
  } else if (!locs.empty()) {
    ApplyFree(locs);
  }
  return Status::Ok();
}

Status PageInterleaveAllocator::FreeGroupBegin() {
  if (in_group_) return FreeGroupAlreadyOpen();
  in_group_ = true;
  group_locs_.clear();
  return Status::Ok();
}

Status PageInterleaveAllocator::FreeGroupEnd() {
  if (!in_group_) return NoFreeGroupOpen();
  in_group_ = false;
  if (!group_locs_.empty()) ApplyFree(group_locs_);
  group_locs_.clear();
  return Status::Ok();
}

Status PageInterleaveAllocator::FreeGroup(const std::vector<std::vector<int64_t>>& frees) {
  if (in_group_) return FreeGroupAlreadyOpen();
  for (size_t f = 0; f < frees.size(); ++f) {
    if (Status s = ValidateFreeLocs(frees[f], config_, allocated_); !s.ok()) return InFreeGroup(f, s);
  }
  KVSHARD_RETURN_IF_ERROR(FreeGroupBegin());
  for (const std::vector<int64_t>& locs : frees) KVSHARD_RETURN_IF_ERROR(Free(locs));
  return FreeGroupEnd();
}

std::vector<int64_t> PageInterleaveAllocator::class_free_page_counts() const {
  std::vector<int64_t> counts(config_.shard_size);
  for (int64_t c = 0; c < config_.shard_size; ++c) counts[c] = ClassCount(c);
  return counts;
}

int64_t PageInterleaveAllocator::available_size() const {
  int64_t lo = ClassCount(0);
  for (int64_t c = 1; c < config_.shard_size; ++c) lo = std::min(lo, ClassCount(c));
  return config_.shard_size * config_.page_size * lo;
}

int64_t PageInterleaveAllocator::aggregate_free_size() const {
  int64_t sum = 0;
  for (int64_t c = 0; c < config_.shard_size; ++c) sum += ClassCount(c);
  return config_.page_size * sum;
}

int64_t PageInterleaveAllocator::least_full_class() const {
  int64_t best = 0;
  for (int64_t c = 1; c < config_.shard_size; ++c) {
    if (ClassCount(c) > ClassCount(best)) best = c;
  }
  return best;
}

std::vector<int64_t> PageInterleaveAllocator::free_list(int64_t c) const {
  return std::vector<int64_t>(free_[c].rbegin(), free_[c].rend());
}

std::vector<int64_t> PageInterleaveAllocator::release_list(int64_t c) const {
  return std::vector<int64_t>(release_[c].rbegin(), release_[c].rend());
}

bool PageInterleaveAllocator::is_allocated(int64_t page) const {
  return page >= 0 && page < num_logical_pages() && allocated_[page];
}

}  // namespace kvshard::fast
