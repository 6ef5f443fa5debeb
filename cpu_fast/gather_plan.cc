// Fast begin_shard_extend. Prefix pages are deduplicated in a bitmap over logical pages; scanning it
// in ascending page order yields page_pos in ascending order AND each owner's pages in local-page order,
// so the owner-major slot of a page is owner * block_pages + (pages of that owner seen so far): no sort.
#include "cpu_fast/gather_plan.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "core/spec.h"
#include "cpu_fast/divide.h"

namespace kvshard::fast {
namespace {

// A word whose 64 pages are all prefix pages, when N divides 64 (page w*64 + j*N + o is owner o's
// (within[o] + j)-th page): its slots, send entries and page_pos pairs in closed form. Returns false if an owner
// would exceed block_pages, with the owners before it already advanced: the batch then fails anyway (the
// per-page loop, which only sees larger `within`, reports it), so the check needs no loop of its own.
bool DenseWord(int64_t w, int64_t n, int64_t block_pages, uint32_t* within, int64_t* const* send, int64_t* out_page,
               int64_t* out_pos) {
  const int64_t per_owner = 64 / n;
  std::array<int64_t, 64> first_slot;
  for (int64_t o = 0; o < n; ++o) {
    const int64_t k = within[o];
    if (k + per_owner > block_pages) return false;
    first_slot[o] = o * block_pages + k;
    for (int64_t j = 0; j < per_owner; ++j) send[o][k + j] = w * per_owner + j;
    within[o] = static_cast<uint32_t>(k + per_owner);
  }
  for (int64_t b = 0; b < 64; ++b) out_page[b] = w * 64 + b;
  for (int64_t j = 0; j < per_owner; ++j) {
    for (int64_t o = 0; o < n; ++o) out_pos[j * n + o] = first_slot[o] + j;
  }
  return true;
}

// Sets bits [begin, end) of `bits`.
void SetBitRange(uint64_t* bits, int64_t begin, int64_t end) {
  const int64_t first_word = begin >> 6, last_word = (end - 1) >> 6;
  const uint64_t head = ~uint64_t{0} << (begin & 63), tail = ~uint64_t{0} >> (63 - ((end - 1) & 63));
  if (first_word == last_word) {
    bits[first_word] |= head & tail;
    return;
  }
  bits[first_word] |= head;
  for (int64_t w = first_word + 1; w < last_word; ++w) bits[w] = ~uint64_t{0};
  bits[last_word] |= tail;
}

}  // namespace

void GatherPlanner::ClearBits() {
  std::fill(prefix_bits_.begin(), prefix_bits_.end(), 0);
  std::fill(chunk_bits_.begin(), chunk_bits_.end(), 0);
}

Status GatherPlanner::Build(const ExtendBatch& batch, GatherPlan* plan, bool with_send_rows) {
  // The per-request structural checks of ValidateExtendBatch are fused into pass 1 (one read of the pages).
  KVSHARD_RETURN_IF_ERROR(ValidateExtendBatchGeometry(batch));
  const int64_t n = batch.shard_size, ps = batch.page_size;
  const FastDivMod by_n(n);
  const int64_t page_pos_size = n * (batch.pages_per_rank + 2);
  const size_t words = (page_pos_size + 63) / 64;
  if (prefix_bits_.size() < words) {
    prefix_bits_.assign(words, 0);
    chunk_bits_.assign(words, 0);
  }
  if (static_cast<int64_t>(slot_.size()) < page_pos_size) slot_.resize(page_pos_size);
  uint64_t* pbits = prefix_bits_.data();
  uint64_t* cbits = chunk_bits_.data();

  // The errors are those of ValidateExtendBatch followed by the semantic checks, as if run in that order: every
  // structural fault (of any request) wins over any semantic one, and among each kind the first request's wins.
  // Pass 1 checks request i's structure before its semantics, so a structural fault of request i is the first
  // of the batch; ValidateExtendRequest, which only runs on a fault, supplies its exact message.
  const int64_t lo_page = n, hi_page = n * (batch.pages_per_rank + 1);  // allocatable logical pages
  auto structural_fault = [&](size_t i) -> Status {
    ClearBits();
    Status s = ValidateExtendRequest(batch, i);
    return s.ok() ? Internal("requests[", i, "]: structural check disagrees with ValidateExtendRequest") : s;
  };
  // A semantic fault of request i is reported only if no request from i on has a structural fault.
  auto semantic_fault = [&](size_t i, Status semantic) -> Status {
    ClearBits();
    for (size_t j = i; j < batch.requests.size(); ++j) KVSHARD_RETURN_IF_ERROR(ValidateExtendRequest(batch, j));
    return semantic;
  };

  // Pass 1, per request: structure (lengths, page count, page range), alignment, cyclic prefix owners, dedup of
  // prefix pages, block bound. A prefix that is the head of the previous request's (shared cached prompt) is
  // already checked and marked.
  const bool pow2 = (n & (n - 1)) == 0;
  const int ps_shift = (ps & (ps - 1)) == 0 ? __builtin_ctzll(ps) : -1;  // pages are usually a power of two
  int64_t block_pages = 0, n_chunk = 0;
  int64_t lo_word = static_cast<int64_t>(words), hi_word = -1;  // bitmap words holding a set bit
  const int64_t* prev = nullptr;
  int64_t prev_k = 0;
  for (size_t i = 0; i < batch.requests.size(); ++i) {
    const ExtendRequest& r = batch.requests[i];
    if (r.prefix_len < 0 || r.prefix_len >= kMaxSlot || r.seq_len < r.prefix_len || r.seq_len >= kMaxSlot ||
        static_cast<int64_t>(r.pages.size()) !=
            (ps_shift >= 0 ? (r.seq_len + ps - 1) >> ps_shift : PositionPages(r.seq_len, ps))) {
      return structural_fault(i);
    }
    const int64_t k_pages = ps_shift >= 0 ? r.prefix_len >> ps_shift : r.prefix_len / ps;
    if (k_pages * ps != r.prefix_len) {
      return semantic_fault(i, MisalignedPrefixError(i, r.prefix_len, ps));
    }
    const int64_t* pages = r.pages.data();
    const int64_t n_pages = static_cast<int64_t>(r.pages.size());  // >= k_pages: seq_len >= prefix_len
    bool out_of_range = false;                                     // chunk pages (usually one) here, prefix pages below
    for (int64_t k = k_pages; k < n_pages; ++k) out_of_range |= pages[k] < lo_page || pages[k] >= hi_page;
    if (out_of_range) return structural_fault(i);
    n_chunk += n_pages - k_pages;
    if (k_pages == 0) continue;
    block_pages += k_pages < kFastDivLimit - n ? by_n.Div(k_pages + n - 1) : (k_pages + n - 1) / n;
    // The head of the previous request's prefix: already range-checked, checked cyclic and marked.
    if (k_pages <= prev_k && std::memcmp(pages, prev, k_pages * sizeof(int64_t)) == 0) continue;
    // A run of consecutive logical pages (a fresh pool hands chains out this way) is cyclic by construction, is
    // in range if its ends are, and is marked a word at a time.
    // (Unsigned: the pages are not range-checked yet; with `first` in range, equality modulo 2^64 is exact.)
    const int64_t first = pages[0];
    uint64_t gaps = 0;  // an OR of differences, not a chain of compares, so that it vectorizes
    for (int64_t k = 0; k < k_pages; ++k) {
      gaps |= (static_cast<uint64_t>(pages[k]) - static_cast<uint64_t>(k)) ^ static_cast<uint64_t>(first);
    }
    if (gaps == 0) {
      if (first < lo_page || first > hi_page - k_pages) return structural_fault(i);
      SetBitRange(pbits, first, first + k_pages);
      lo_word = std::min(lo_word, first >> 6);
      hi_word = std::max(hi_word, (first + k_pages - 1) >> 6);
      prev = pages;
      prev_k = k_pages;
      continue;
    }
    int64_t min_page = hi_page, max_page = lo_page;
    for (int64_t k = 0; k < k_pages; ++k) {
      min_page = pages[k] < min_page ? pages[k] : min_page;
      max_page = pages[k] > max_page ? pages[k] : max_page;
    }
    if (min_page < lo_page || max_page >= hi_page) return structural_fault(i);
    // Cyclic: page[k] - k is congruent to page[0] modulo N for every k.
    bool cyclic = true;
    if (pow2) {
      const uint64_t mask = n - 1, want = pages[0] & mask;
      for (int64_t k = 0; k < k_pages; ++k) cyclic &= ((pages[k] - k) & mask) == want;
    } else {
      uint64_t want = by_n.Mod(pages[0]);
      for (int64_t k = 0; k < k_pages; ++k) {
        cyclic &= by_n.Mod(pages[k]) == want;
        want = (want + 1 == static_cast<uint64_t>(n)) ? 0 : want + 1;
      }
    }
    if (!cyclic) {
      return semantic_fault(i, NonCyclicPrefixError(i, std::span<const int64_t>(r.pages.data(), k_pages), n));
    }
    // Mark the pages, accumulating bits of the same word in a register (runs are mostly ascending).
    int64_t word_index = pages[0] >> 6;
    uint64_t acc = 0;
    for (int64_t k = 0; k < k_pages; ++k) {
      const int64_t w = pages[k] >> 6;
      if (w != word_index) {
        pbits[word_index] |= acc;
        lo_word = std::min(lo_word, word_index);
        hi_word = std::max(hi_word, word_index);
        word_index = w;
        acc = 0;
      }
      acc |= uint64_t{1} << (pages[k] & 63);
    }
    pbits[word_index] |= acc;
    lo_word = std::min(lo_word, word_index);
    hi_word = std::max(hi_word, word_index);
    prev = pages;
    prev_k = k_pages;
  }
  const int64_t n_prefix_slots = n * block_pages;
  if (n_prefix_slots * ps > batch.max_prefix_tokens) {
    int64_t n_prefix = 0;
    for (size_t w = 0; w < words; ++w) n_prefix += __builtin_popcountll(pbits[w]);
    ClearBits();
    return PrefixCapacityError(n_prefix, n_prefix_slots * ps, batch.max_prefix_tokens);
  }
  if (n_chunk * ps > batch.chunk_tokens) {
    ClearBits();
    return ChunkCapacityError(n_chunk * ps, batch.chunk_tokens);
  }

  // Pass 2: chunk pages in batch order at chunk_base_page + j; they must be fresh (not prefix, not repeated).
  const int64_t chunk_base_page = batch.max_prefix_tokens / ps;
  int64_t next_chunk = chunk_base_page;
  for (size_t i = 0; i < batch.requests.size(); ++i) {
    const ExtendRequest& r = batch.requests[i];
    for (size_t j = r.prefix_len / ps; j < r.pages.size(); ++j) {
      const int64_t page = r.pages[j];
      const uint64_t bit = uint64_t{1} << (page & 63);
      if ((pbits[page >> 6] | cbits[page >> 6]) & bit) {
        ClearBits();
        return StaleChunkPageError(i, j, page);
      }
      cbits[page >> 6] |= bit;
      slot_[page] = next_chunk++;
      lo_word = std::min(lo_word, page >> 6);
      hi_word = std::max(hi_word, page >> 6);
    }
  }

  // A sparse span (a batch's pages scattered over a large pool: 10^5 words for a few hundred written) is walked
  // through the written words, found from the pages themselves; a dense one word by word.
  bool sparse = false;
  if (hi_word - lo_word >= 4096) {
    size_t pages = 0;
    for (const ExtendRequest& r : batch.requests) pages += r.pages.size();
    sparse = static_cast<size_t>(hi_word - lo_word) > pages / 8;
  }
  if (sparse) {
    written_.clear();
    for (const ExtendRequest& r : batch.requests) {
      for (int64_t p : r.pages) written_.push_back(p >> 6);
    }
    std::sort(written_.begin(), written_.end());
    written_.erase(std::unique(written_.begin(), written_.end()), written_.end());
  }
  int64_t n_prefix = 0;  // the span is sparse at large N (ranks fill unevenly): skip empty words
  if (sparse) {
    for (int64_t w : written_) n_prefix += __builtin_popcountll(pbits[w]);
  } else {
    for (int64_t w = lo_word; w <= hi_word; ++w) {
      if (pbits[w]) n_prefix += __builtin_popcountll(pbits[w]);
    }
  }

  // Pass 3, per bitmap word in [lo_word, hi_word] (the span pass 1 and 2 touched): first give the word's prefix
  // pages their owner-major slots (ascending, so each owner's pages arrive in local-page order) and their send
  // entries, then emit page_pos pairs for the word's prefix and chunk pages from the dense slot table.
  plan->shard_size = n;
  plan->page_size = ps;
  plan->block_pages = block_pages;
  plan->n_prefix_slots = n_prefix_slots;
  plan->chunk_base_page = chunk_base_page;
  plan->trash_page = (batch.max_prefix_tokens + batch.chunk_tokens) / ps;
  plan->page_pos_size = page_pos_size;
  plan->mapped_pages.resize(n_prefix + n_chunk);
  plan->mapped_scratch_pages.resize(n_prefix + n_chunk);
  plan->ranks.resize(n);
  within_.assign(n, 0);
  send_.resize(n);
  for (int64_t r = 0; r < n; ++r) {
    plan->ranks[r].rank = r;
    plan->ranks[r].send_local_pages.resize(block_pages);  // filled below, then trash-page padded
    send_[r] = plan->ranks[r].send_local_pages.data();
  }
  // Locals of distinct types than the int64 outputs, so the stores below cannot alias them.
  uint32_t* within = within_.data();
  int64_t* const* send = send_.data();
  int64_t* slot = slot_.data();
  int64_t* out_page = plan->mapped_pages.data();
  int64_t* out_pos = plan->mapped_scratch_pages.data();
  const bool owners_tile_words = pow2 && n <= 64;  // owner of bit b of any word = b % N
  // One written word: its prefix pages' owner-major slots and send entries, then its page_pos pairs. Returns the
  // owner that would exceed block_pages (an internal error), else -1.
  auto place_word = [&](int64_t w) -> int64_t {
    uint64_t prefix = pbits[w];
    const uint64_t all = prefix | cbits[w];
    if (!all) return -1;
    pbits[w] = cbits[w] = 0;
    if (prefix == ~uint64_t{0} && owners_tile_words && DenseWord(w, n, block_pages, within, send, out_page, out_pos)) {
      out_page += 64;
      out_pos += 64;
      return -1;
    }
    for (; prefix; prefix &= prefix - 1) {
      const int64_t page = w * 64 + __builtin_ctzll(prefix);
      const int64_t owner = by_n.Mod(page);
      const int64_t k = within[owner]++;
      if (k >= block_pages) return owner;
      slot[page] = owner * block_pages + k;
      send[owner][k] = by_n.Div(page);
    }
    for (uint64_t bits = all; bits; bits &= bits - 1) {
      const int64_t page = w * 64 + __builtin_ctzll(bits);
      *out_page++ = page;
      *out_pos++ = slot[page];
    }
    return -1;
  };
  int64_t overfull = -1;
  if (sparse) {
    for (size_t i = 0; i < written_.size() && overfull < 0; ++i) overfull = place_word(written_[i]);
  } else {
    for (int64_t w = lo_word; w <= hi_word && overfull < 0; ++w) overfull = place_word(w);
  }
  if (overfull >= 0) {
    ClearBits();
    return Internal("negative all-gather pad: rank ", overfull, " owns more than block_pages=", block_pages,
                    " prefix pages");
  }
  for (int64_t r = 0; r < n; ++r) {  // trash-page pad (fill_n: send[r] is null when block_pages is 0)
    std::fill_n(send[r] + within[r], block_pages - within[r], int64_t{0});
  }
  for (RankSend& r : plan->ranks) {
    if (!with_send_rows) {
      r.send_rows.clear();
      continue;
    }
    r.send_rows.resize(block_pages * ps);
    int64_t* row = r.send_rows.data();
    for (int64_t p : r.send_local_pages) {
      for (int64_t k = 0; k < ps; ++k) *row++ = p * ps + k;
    }
  }
  return Status::Ok();
}

StatusOr<GatherPlan> BuildGatherPlan(const ExtendBatch& batch) {
  GatherPlanner planner;
  GatherPlan plan;
  KVSHARD_RETURN_IF_ERROR(planner.Build(batch, &plan));
  return plan;
}

}  // namespace kvshard::fast
