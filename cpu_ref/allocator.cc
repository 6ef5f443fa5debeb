// Reference rotated owner-classed allocator, in the order of spec §2 and SGLang's page_interleave_allocator.py:
// per-class free and release lists kept head first (deques: pop the head, prepend freed pages), alloc_extend's
// pass 1 on simulated counts, the need_sort merge, pass 2's pops. The input checks (kvshard's; SGLang asserts)
// are core/page_allocator.h's, shared with cpu_fast/allocator.cc.
#include "cpu_ref/allocator.h"

#include <algorithm>

namespace kvshard::ref {
namespace {

// Floor of the simulated class counts: far below any real deficit (a batch's pages are < 2^48 each). SGLang's
// Python ints are unbounded; saturating here keeps a huge batch from overflowing while it still defers.
constexpr int64_t kSimFloor = -(int64_t{1} << 62);

// SGLang's _class_counts[c]: pages drawn from class c by a cyclic run of `new_pages` pages from `start_class`,
// new_pages // N + ((c - start_class) % N < new_pages % N).
int64_t ClassCount(int64_t start_class, int64_t new_pages, int64_t n, int64_t c) {
  return new_pages / n + ((c - start_class + n) % n < new_pages % n ? 1 : 0);
}

// argmax_c (counts[c], -c): the class with the most free pages, ties to the lowest id.
int64_t LeastFullClass(const std::vector<int64_t>& counts) {
  int64_t best = 0;
  for (int64_t c = 1; c < static_cast<int64_t>(counts.size()); ++c) {
    if (counts[c] > counts[best]) best = c;
  }
  return best;
}

}  // namespace

StatusOr<PageInterleaveAllocator> PageInterleaveAllocator::Create(const AllocatorConfig& config) {
  KVSHARD_RETURN_IF_ERROR(ValidateAllocatorConfig(config));
  return PageInterleaveAllocator(config);
}

// clear(): class r's free list holds the allocatable pages l % N == r, ascending: [i*N + r for i in 1..ppr].
// Logical pages [0, N) (every rank's local page 0, the trash page) are reserved: never free.
PageInterleaveAllocator::PageInterleaveAllocator(const AllocatorConfig& config)
    : config_(config),
      class_free_pages_(config.shard_size),
      class_release_pages_(config.shard_size),
      allocated_(config.shard_size * (config.pages_per_rank + 1), 0) {
  const int64_t n = config.shard_size;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 1; i <= config.pages_per_rank; ++i) class_free_pages_[r].push_back(i * n + r);
  }
  for (int64_t l = 0; l < n; ++l) allocated_[l] = 1;
}

StatusOr<std::vector<PageInterleaveAllocator::Run>> PageInterleaveAllocator::SimulateDraws(
    const AllocBatch& batch, std::vector<int64_t>* rotation_bases, std::vector<int64_t>* sim_counts) const {
  const int64_t n = config_.shard_size, ps = config_.page_size;
  std::vector<Run> runs;
  for (size_t i = 0; i < batch.prefix_lens.size(); ++i) {
    KVSHARD_ASSIGN_OR_RETURN(const int64_t new_pages, ExtendRequestNewPages(batch, i, ps));
    if (!IsValidRotationBase(batch.rotation_bases[i], n)) return RotationBaseError(batch, i, n);
    // A new chain: the least-full class over the simulated counts (earlier requests already subtracted).
    if ((*rotation_bases)[i] == kNewChain) (*rotation_bases)[i] = LeastFullClass(*sim_counts);
    const int64_t base = (*rotation_bases)[i], prefix_pages = batch.prefix_lens[i] / ps;
    if (config_.check_last_loc && prefix_pages > 0) {
      KVSHARD_RETURN_IF_ERROR(CheckLastLoc(batch, i, base, prefix_pages, config_));
    }
    const int64_t start_class = (base + prefix_pages) % n;
    runs.push_back({start_class, new_pages});
    for (int64_t c = 0; c < n; ++c) {
      (*sim_counts)[c] = std::max((*sim_counts)[c] - ClassCount(start_class, new_pages, n, c), kSimFloor);
    }
  }
  return runs;
}

StatusOr<bool> PageInterleaveAllocator::AllocExtend(const AllocBatch& batch, ExtendPages* out) {
  KVSHARD_RETURN_IF_ERROR(ValidateAllocBatchLengths(batch));
  // Pass 1: resolve the bases and check every class's supply on simulated counts: commit whole or defer whole.
  std::vector<int64_t> rotation_bases = batch.rotation_bases;
  std::vector<int64_t> sim_counts = class_free_page_counts();
  KVSHARD_ASSIGN_OR_RETURN(const std::vector<Run> runs, SimulateDraws(batch, &rotation_bases, &sim_counts));
  if (*std::min_element(sim_counts.begin(), sim_counts.end()) < 0) return false;
  // need_sort: the batch's need of class c is its count minus what the simulation leaves.
  std::vector<int64_t> needs = class_free_page_counts();
  for (int64_t c = 0; c < config_.shard_size; ++c) needs[c] -= sim_counts[c];
  MergeIfAnyFreeListShort(needs);
  // Pass 2: request by request, class c's head pages fill positions (c - start) % N, +N, +2N, ...
  const int64_t n = config_.shard_size;
  *out = ExtendPages{{}, {0}, rotation_bases};
  for (const Run& run : runs) {
    const size_t first = out->pages.size();  // the request's pages: out->pages[first, first + new_pages)
    out->pages.resize(first + static_cast<size_t>(run.new_pages));
    for (int64_t c = 0; c < n; ++c) {
      const int64_t count = ClassCount(run.start_class, run.new_pages, n, c);
      for (int64_t k = 0; k < count; ++k) out->pages[first + (c - run.start_class + n) % n + k * n] = PopHead(c);
    }
    out->offsets.push_back(static_cast<int64_t>(out->pages.size()));
  }
  return true;
}

// Owner-plan mode (kvshard's, not SGLang's): page j of request i from class page_classes[i][j], no rotation.
StatusOr<bool> PageInterleaveAllocator::AllocExtendByClasses(const AllocBatch& batch,
                                                             const std::vector<std::vector<int64_t>>& page_classes,
                                                             ExtendPages* out) {
  KVSHARD_RETURN_IF_ERROR(ValidateByClassesLengths(batch, page_classes.size()));
  std::vector<int64_t> needs(config_.shard_size, 0);
  for (size_t i = 0; i < page_classes.size(); ++i) {
    KVSHARD_ASSIGN_OR_RETURN(const int64_t new_pages, ExtendRequestNewPages(batch, i, config_.page_size));
    KVSHARD_RETURN_IF_ERROR(ValidatePageClasses(page_classes[i], i, new_pages, config_.shard_size));
    for (int64_t c : page_classes[i]) ++needs[c];
  }
  const std::vector<int64_t> counts = class_free_page_counts();
  for (int64_t c = 0; c < config_.shard_size; ++c) {
    if (needs[c] > counts[c]) return false;  // defer the whole batch, state unchanged
  }
  MergeIfAnyFreeListShort(needs);
  *out = ExtendPages{{}, {0}, batch.rotation_bases};
  for (const std::vector<int64_t>& classes : page_classes) {
    for (int64_t c : classes) out->pages.push_back(PopHead(c));
    out->offsets.push_back(static_cast<int64_t>(out->pages.size()));
  }
  return true;
}

void PageInterleaveAllocator::MergeIfAnyFreeListShort(const std::vector<int64_t>& needs) {
  if (!config_.need_sort) return;
  for (int64_t c = 0; c < config_.shard_size; ++c) {
    if (needs[c] > static_cast<int64_t>(class_free_pages_[c].size())) {
      MergeAndSortFree();  // every class, not only the short one
      return;
    }
  }
}

void PageInterleaveAllocator::MergeAndSortFree() {
  for (int64_t r = 0; r < config_.shard_size; ++r) {
    if (class_release_pages_[r].empty()) continue;
    std::deque<int64_t>& free = class_free_pages_[r];
    free.insert(free.end(), class_release_pages_[r].begin(), class_release_pages_[r].end());
    std::sort(free.begin(), free.end());
    class_release_pages_[r].clear();
  }
}

int64_t PageInterleaveAllocator::PopHead(int64_t c) {
  const int64_t page = class_free_pages_[c].front();
  class_free_pages_[c].pop_front();
  allocated_[page] = 1;
  return page;
}

// pages = sorted unique locs // ps; class r's freed pages (ascending) are prepended to its free list, or to its
// release list under need_sort: a freed page is the next one reused.
void PageInterleaveAllocator::ApplyFree(const std::vector<int64_t>& locs) {
  std::vector<int64_t> pages;  // torch.unique(free_index // page_size): sorted, unique
  pages.reserve(locs.size());
  for (int64_t loc : locs) pages.push_back(loc / config_.page_size);
  std::sort(pages.begin(), pages.end());
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  // Class r's list gets pages[owners == r] prepended, in their order: pushed to its front from the last one back.
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) {
    const int64_t r = *it % config_.shard_size;
    (config_.need_sort ? class_release_pages_[r] : class_free_pages_[r]).push_front(*it);
  }
  for (int64_t l : pages) allocated_[l] = 0;
}

Status PageInterleaveAllocator::Free(const std::vector<int64_t>& locs) {
  KVSHARD_RETURN_IF_ERROR(ValidateFreeLocs(locs, config_, allocated_));
  if (locs.empty()) return Status::Ok();
  if (in_free_group_) {
    free_group_.insert(free_group_.end(), locs.begin(), locs.end());  // a snapshot of the values
  } else {
    ApplyFree(locs);
  }
  return Status::Ok();
}

Status PageInterleaveAllocator::FreeGroupBegin() {
  if (in_free_group_) return FreeGroupAlreadyOpen();
  in_free_group_ = true;
  free_group_.clear();
  return Status::Ok();
}

// The queued frees, concatenated, freed as one.
Status PageInterleaveAllocator::FreeGroupEnd() {
  if (!in_free_group_) return NoFreeGroupOpen();
  in_free_group_ = false;
  if (!free_group_.empty()) ApplyFree(free_group_);
  free_group_.clear();
  return Status::Ok();
}

Status PageInterleaveAllocator::FreeGroup(const std::vector<std::vector<int64_t>>& frees) {
  if (in_free_group_) return FreeGroupAlreadyOpen();
  for (size_t f = 0; f < frees.size(); ++f) {
    if (Status s = ValidateFreeLocs(frees[f], config_, allocated_); !s.ok()) return InFreeGroup(f, s);
  }
  KVSHARD_RETURN_IF_ERROR(FreeGroupBegin());
  for (const std::vector<int64_t>& locs : frees) KVSHARD_RETURN_IF_ERROR(Free(locs));
  return FreeGroupEnd();
}

// Free pages of class r: its free + release list lengths.
int64_t PageInterleaveAllocator::ClassFreePageCount(int64_t r) const {
  return static_cast<int64_t>(class_free_pages_[r].size() + class_release_pages_[r].size());
}

std::vector<int64_t> PageInterleaveAllocator::class_free_page_counts() const {
  std::vector<int64_t> counts;
  counts.reserve(static_cast<size_t>(config_.shard_size));
  for (int64_t r = 0; r < config_.shard_size; ++r) counts.push_back(ClassFreePageCount(r));
  return counts;
}

// The min-class floor N * ps * min(counts): a K-page request needs up to ceil(K / N) pages of every class.
int64_t PageInterleaveAllocator::available_size() const {
  int64_t least = ClassFreePageCount(0);
  for (int64_t r = 1; r < config_.shard_size; ++r) least = std::min(least, ClassFreePageCount(r));
  return config_.shard_size * config_.page_size * least;
}

int64_t PageInterleaveAllocator::aggregate_free_size() const {
  int64_t sum = 0;
  for (int64_t r = 0; r < config_.shard_size; ++r) sum += ClassFreePageCount(r);
  return config_.page_size * sum;
}

int64_t PageInterleaveAllocator::least_full_class() const { return LeastFullClass(class_free_page_counts()); }

std::vector<int64_t> PageInterleaveAllocator::free_list(int64_t c) const {
  return std::vector<int64_t>(class_free_pages_[c].begin(), class_free_pages_[c].end());
}

std::vector<int64_t> PageInterleaveAllocator::release_list(int64_t c) const {
  return std::vector<int64_t>(class_release_pages_[c].begin(), class_release_pages_[c].end());
}

bool PageInterleaveAllocator::is_allocated(int64_t page) const {
  return page >= 0 && page < num_logical_pages() && allocated_[page];
}

namespace {

// The allocator's observable state after op `kind`.
AllocOpResult Snapshot(const PageInterleaveAllocator& a, AllocOpKind kind) {
  AllocOpResult r;
  r.kind = kind;
  r.class_free_page_counts = a.class_free_page_counts();
  r.available_size = a.available_size();
  r.aggregate_free_size = a.aggregate_free_size();
  return r;
}

Status Prefixed(size_t k, const Status& s) { return Status(s.code(), StrCat("ops[", k, "].", s.message())); }

// Runs op k on `a`; an alloc's answer (ok, bases, per-request pages) goes into `result`.
Status RunOp(PageInterleaveAllocator& a, const AllocOp& op, AllocOpResult* result) {
  if (op.kind == AllocOpKind::kFree) return a.Free(op.locs);
  if (op.kind == AllocOpKind::kFreeGroup) return a.FreeGroup(op.frees);
  ExtendPages pages;
  KVSHARD_ASSIGN_OR_RETURN(result->ok, a.AllocExtend(op.alloc, &pages));
  if (!result->ok) return Status::Ok();
  result->rotation_bases = pages.rotation_bases;
  for (size_t i = 0; i + 1 < pages.offsets.size(); ++i) {
    result->pages.emplace_back(pages.pages.begin() + pages.offsets[i], pages.pages.begin() + pages.offsets[i + 1]);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<AllocOpResult>> RunAllocScript(const AllocScript& script) {
  KVSHARD_ASSIGN_OR_RETURN(PageInterleaveAllocator a,
                           PageInterleaveAllocator::Create({script.shard_size, script.page_size, script.pages_per_rank,
                                                            script.need_sort, script.check_last_loc}));
  std::vector<AllocOpResult> results;
  for (size_t k = 0; k < script.ops.size(); ++k) {
    AllocOpResult answer;
    if (Status s = RunOp(a, script.ops[k], &answer); !s.ok()) return Prefixed(k, s);
    AllocOpResult r = Snapshot(a, script.ops[k].kind);
    r.ok = answer.ok;
    r.rotation_bases = std::move(answer.rotation_bases);
    r.pages = std::move(answer.pages);
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace kvshard::ref
