// Reference rotated owner-classed allocator. Class lists are stored reversed (head at back()) so that
// popping the head and prepending freed pages are both O(1) amortized.
#include "cpu_ref/allocator.h"

#include <algorithm>
#include <functional>

#include "core/gather_plan.h"
#include "core/spec.h"

namespace kvshard::ref {
namespace {

// Floor of alloc_extend's simulated class counts: far below any real deficit (a batch's pages are < 2^48 each).
constexpr int64_t kSimFloor = -(int64_t{1} << 62);

// Request i's new pages, or an error naming its misaligned prefix, out-of-range seq_len or missing new page.
StatusOr<int64_t> RequestNewPages(const AllocBatch& batch, size_t i, int64_t ps) {
  const int64_t prefix_len = batch.prefix_lens[i], seq_len = batch.seq_lens[i];
  if (prefix_len < 0 || prefix_len >= kMaxSlot || prefix_len % ps != 0) {
    return InvalidArgument("prefix_lens[", i, "]: must be a page-aligned multiple of page_size (", ps,
                           ") in [0, 2^48), got ", prefix_len);
  }
  if (seq_len < 0 || seq_len >= kMaxSlot) return InvalidArgument("seq_lens[", i, "]: must be in [0, 2^48), got ", seq_len);
  const int64_t new_pages = PositionPages(seq_len, ps) - prefix_len / ps;
  if (new_pages <= 0) {
    return InvalidArgument("seq_lens[", i, "]: must need at least one new page past prefix_len ", prefix_len,
                           " (page_size ", ps, "), got ", seq_len);
  }
  return new_pages;
}

}  // namespace

StatusOr<PageInterleaveAllocator> PageInterleaveAllocator::Create(const AllocatorConfig& config) {
  KVSHARD_RETURN_IF_ERROR(ValidatePlacementSpec({config.shard_size, config.page_size}));
  if (config.pages_per_rank < 0 || config.pages_per_rank >= kMaxPoolLogicalPages / config.shard_size) {
    return InvalidArgument("pages_per_rank: must be in [0, ", kMaxPoolLogicalPages / config.shard_size,
                           ") so that shard_size*(pages_per_rank+1) <= 2^24, got ", config.pages_per_rank);
  }
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
  if (batch.seq_lens.size() != reqs || batch.rotation_bases.size() != reqs || batch.last_locs.size() != reqs) {
    return InvalidArgument("seq_lens: prefix_lens, seq_lens, rotation_bases and last_locs must have equal "
                           "lengths, got ", reqs, ", ", batch.seq_lens.size(), ", ", batch.rotation_bases.size(),
                           ", ", batch.last_locs.size());
  }
  // Pass 1: validate, resolve new chains on the simulated counts, simulate every class's draw.
  for (int64_t c = 0; c < n; ++c) sim_[c] = ClassCount(c);
  out->rotation_bases.assign(batch.rotation_bases.begin(), batch.rotation_bases.end());
  starts_.resize(reqs);
  bool deferred = false;
  int64_t total_pages = 0;
  for (size_t i = 0; i < reqs; ++i) {
    const int64_t prefix_len = batch.prefix_lens[i];
    KVSHARD_ASSIGN_OR_RETURN(const int64_t new_pages, RequestNewPages(batch, i, ps));
    int64_t base = batch.rotation_bases[i];
    if (base != kNewChain && (base < 0 || base >= n)) {
      return InvalidArgument("rotation_bases[", i, "]: must be null or in [0, ", n, "), got ", base);
    }
    if (base == kNewChain) {
      base = static_cast<int64_t>(std::max_element(sim_.begin(), sim_.end()) - sim_.begin());
      out->rotation_bases[i] = base;
    }
    const int64_t prefix_pages = prefix_len / ps;
    if (config_.check_last_loc && prefix_pages > 0) {
      const int64_t last_loc = batch.last_locs[i];
      const int64_t owner = (last_loc % (n * ps)) / ps, want = (base + prefix_pages - 1) % n;
      if (last_loc < 0 || owner != want) {
        return InvalidArgument("last_locs[", i, "]: owner ", owner, " of last_loc ", last_loc,
                               " breaks the cyclic rotation (base ", base, ", ", prefix_pages,
                               " prefix pages: expected owner ", want, ")");
      }
    }
    const int64_t start = (base + prefix_pages) % n;
    starts_[i] = start;
    // Keep simulating past a deferral, as SGLang does: later null bases resolve on the simulated counts.
    // Counts saturate at kSimFloor so that no batch overflows them (SGLang's Python ints are unbounded).
    const int64_t q = new_pages / n, rem = new_pages % n;
    for (int64_t c = 0; c < n; ++c) sim_[c] = std::max(sim_[c] - q, kSimFloor);
    for (int64_t j = 0, c = start; j < rem; ++j, c = (c + 1 == n ? 0 : c + 1)) sim_[c] = std::max(sim_[c] - 1, kSimFloor);
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
  if (batch.seq_lens.size() != reqs || batch.rotation_bases.size() != reqs || page_classes.size() != reqs) {
    return InvalidArgument("page_classes: prefix_lens, seq_lens, rotation_bases and page_classes must have equal "
                           "lengths, got ", reqs, ", ", batch.seq_lens.size(), ", ", batch.rotation_bases.size(),
                           ", ", page_classes.size());
  }
  std::vector<int64_t> need(static_cast<size_t>(n), 0);
  int64_t total_pages = 0;
  for (size_t i = 0; i < reqs; ++i) {
    KVSHARD_ASSIGN_OR_RETURN(const int64_t new_pages, RequestNewPages(batch, i, ps));
    if (static_cast<int64_t>(page_classes[i].size()) != new_pages) {
      return InvalidArgument("page_classes[", i, "]: must name one class per new page (", new_pages, "), got ",
                             page_classes[i].size());
    }
    for (size_t j = 0; j < page_classes[i].size(); ++j) {
      const int64_t c = page_classes[i][j];
      if (c < 0 || c >= n) return InvalidArgument("page_classes[", i, "][", j, "]: must be in [0, ", n, "), got ", c);
      ++need[c];
    }
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

Status PageInterleaveAllocator::ValidateFree(const std::vector<int64_t>& locs) const {
  const int64_t ps = config_.page_size;
  const int64_t slots = num_logical_pages() * ps;
  for (size_t i = 0; i < locs.size(); ++i) {
    if (locs[i] < 0 || locs[i] >= slots) {
      return InvalidArgument("locs[", i, "]: slot ", locs[i], " is outside the pool [0, ", slots, ")");
    }
    const int64_t page = locs[i] / ps;
    if (page < config_.shard_size || !allocated_[page]) {
      return InvalidArgument("locs[", i, "]: page ", page, " (slot ", locs[i],
                             ") is not allocated (double free or reserved page)");
    }
  }
  return Status::Ok();
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
  KVSHARD_RETURN_IF_ERROR(ValidateFree(locs));
  if (in_group_) {
    group_locs_.insert(group_locs_.end(), locs.begin(), locs.end());  // snapshot of the values
  } else if (!locs.empty()) {
    ApplyFree(locs);
  }
  return Status::Ok();
}

Status PageInterleaveAllocator::FreeGroupBegin() {
  if (in_group_) return FailedPrecondition("free_group: a free group is already open");
  in_group_ = true;
  group_locs_.clear();
  return Status::Ok();
}

Status PageInterleaveAllocator::FreeGroupEnd() {
  if (!in_group_) return FailedPrecondition("free_group: no free group is open");
  in_group_ = false;
  if (!group_locs_.empty()) ApplyFree(group_locs_);
  group_locs_.clear();
  return Status::Ok();
}

Status PageInterleaveAllocator::FreeGroup(const std::vector<std::vector<int64_t>>& frees) {
  if (in_group_) return FailedPrecondition("free_group: a free group is already open");
  for (size_t f = 0; f < frees.size(); ++f) {
    if (Status s = ValidateFree(frees[f]); !s.ok()) {
      return Status(s.code(), StrCat("frees[", f, "]", s.message().substr(4)));  // "locs[i]: ..." -> "frees[f][i]: ..."
    }
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

std::vector<int64_t> ExtendSlots(const AllocBatch& batch, const ExtendPages& pages, int64_t page_size) {
  std::vector<int64_t> slots;
  for (size_t i = 0; i + 1 < pages.offsets.size(); ++i) {
    const int64_t len = batch.seq_lens[i] - batch.prefix_lens[i];
    for (int64_t off = 0; off < len; ++off) {
      slots.push_back(pages.pages[pages.offsets[i] + off / page_size] * page_size + off % page_size);
    }
  }
  return slots;
}

namespace {

AllocOpResult Snapshot(const PageInterleaveAllocator& a, AllocOpKind kind) {
  AllocOpResult r;
  r.kind = kind;
  r.class_free_page_counts = a.class_free_page_counts();
  r.available_size = a.available_size();
  r.aggregate_free_size = a.aggregate_free_size();
  return r;
}

Status Prefixed(size_t k, const Status& s) { return Status(s.code(), StrCat("ops[", k, "].", s.message())); }

}  // namespace

StatusOr<std::vector<AllocOpResult>> RunAllocScript(const AllocScript& script) {
  KVSHARD_ASSIGN_OR_RETURN(PageInterleaveAllocator a,
                           PageInterleaveAllocator::Create({script.shard_size, script.page_size,
                                                            script.pages_per_rank, script.need_sort,
                                                            script.check_last_loc}));
  std::vector<AllocOpResult> results;
  ExtendPages pages;
  for (size_t k = 0; k < script.ops.size(); ++k) {
    const AllocOp& op = script.ops[k];
    bool ok = true;
    if (op.kind == AllocOpKind::kAlloc) {
      auto r = a.AllocExtend(op.alloc, &pages);
      if (!r.ok()) return Prefixed(k, r.status());
      ok = *r;
    } else if (op.kind == AllocOpKind::kFree) {
      if (Status s = a.Free(op.locs); !s.ok()) return Prefixed(k, s);
    } else {
      if (Status s = a.FreeGroup(op.frees); !s.ok()) return Prefixed(k, s);
    }
    AllocOpResult r = Snapshot(a, op.kind);
    r.ok = ok;
    if (op.kind == AllocOpKind::kAlloc && ok) {
      r.rotation_bases = pages.rotation_bases;
      for (size_t i = 0; i + 1 < pages.offsets.size(); ++i) {
        r.pages.emplace_back(pages.pages.begin() + pages.offsets[i], pages.pages.begin() + pages.offsets[i + 1]);
      }
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace kvshard::ref
