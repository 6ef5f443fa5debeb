// The request path around SGLang's radix cache (cpu_ref/radix_tree.h), literally: a request's match and lock at
// admission (Req.init_next_round_input + PrefillAdder), a continuing chunk's extend range (add_chunked_req), the
// batch allocation with evict-until-allocatable and the rotation bases read through req.last_node
// (alloc_paged_token_slots_extend + _kv_shard_rotation_bases + write_cache_indices), cache_unfinished_req and
// cache_finished_req with their dedup frees, rebinds and lock moves. The transcription of
// ../shared/sglang_ref/radix.py's helpers and radix_cache.py's cache_*_req, compared with them by
// props/sglang_radix_test.py.
#ifndef KVSHARD_CPU_REF_RADIX_REQUESTS_H_
#define KVSHARD_CPU_REF_RADIX_REQUESTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "cpu_ref/allocator.h"
#include "cpu_ref/radix_tree.h"

namespace kvshard::ref {

// Requests by id over one allocator and the radix tree whose pages it hands out.
class RadixRequests {
 public:
  // What admitting a request (or its next chunk) did.
  struct Admitted {
    int64_t prefix_len = 0;             // len(req.prefix_indices): the extend starts here
    int64_t rotation_base = kNewChain;  // req.last_node's base (kNewChain: None)
  };
  // A batch allocation.
  struct Allocated {
    std::vector<std::vector<int64_t>> pages;    // per request, its new pages in position order
    std::vector<int64_t> rotation_bases;        // the bases stamped on the requests
    int64_t evicted_tokens = 0;                 // tokens the tree evicted first
    std::vector<std::vector<int64_t>> evicted;  // each evicted node's pages (ascending), in eviction order
  };
  // cache_unfinished_req / cache_finished_req.
  struct Cached {
    bool rotation_tail_declined = false;
    int64_t prefix_len = 0;                   // the insert's prefix_len
    int64_t cache_protected_len = 0;          // after the call
    std::vector<std::vector<int64_t>> freed;  // each allocator free() call's pages (ascending), in call order
    std::vector<int64_t> row_pages;           // the request's row after the call, one loc // ps per page
  };

  // `allocator` must outlive this.
  explicit RadixRequests(PageInterleaveAllocator* allocator);

  // A new request `rid` with `tokens` matches its first len - 1 tokens and locks the match; a known one (a
  // continuing chunk) extends from its prefix. The extend ends at `extend_end` (-1: the whole input).
  StatusOr<Admitted> Admit(const std::string& rid, const std::vector<int64_t>& tokens, int64_t extend_end);
  // Allocates the admitted requests' extends as one alloc_extend; an error (state after the evictions) when a
  // class cannot supply its pages, like SGLang's "Prefill out of memory".
  StatusOr<Allocated> AllocExtend(const std::vector<std::string>& rids);
  // cache_unfinished_req of an allocated request.
  StatusOr<Cached> CacheUnfinished(const std::string& rid);
  // cache_finished_req with kv_len_to_handle = kv_len, then the request's slot is released.
  StatusOr<Cached> CacheFinished(const std::string& rid, int64_t kv_len);
  // A request whose batch was not allocated: dec_lock_ref of its last node, slot released (it holds no pages).
  Status Abort(const std::string& rid);
  // The tree's evict.
  StatusOr<int64_t> Evict(int64_t num_tokens) { return tree_.Evict(num_tokens); }
  const RadixTree& tree() const { return tree_; }
  // Every page the tree or a live request's row holds is allocated, and they and the free pages make up the pool;
  // the tree's evictable and protected sizes add up to its total size.
  Status CheckInvariants() const;
  // Live requests.
  int64_t num_requests() const { return static_cast<int64_t>(reqs_.size()); }

 private:
  struct Req {
    RadixTree::Req sg;       // what SGLang's Req holds (fill_ids: origin_input_ids; row: as far as written)
    int64_t extend_end = 0;  // extend_range.end
    bool allocated = false;  // has KV written for [0, extend_end)
  };
  StatusOr<Req*> Find(const std::string& rid, bool need_allocated);
  // _evict_until_allocatable: evicts the shortfall, then at least a page at a time while it frees something.
  Status EvictUntilAllocatable(int64_t num_tokens, Allocated* out);
  Cached Done(const RadixTree::CacheResult& r, const Req& req) const;

  PageInterleaveAllocator* allocator_;
  int64_t n_, ps_;
  RadixTree tree_;
  std::map<std::string, Req> reqs_;
};

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_RADIX_REQUESTS_H_
