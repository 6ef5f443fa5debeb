// SGLang's RadixCache (kv-shard branch, mem_cache/radix_cache.py) transcribed literally: token-keyed nodes
// holding page-aligned runs of KV locs, split at page boundaries, rotation-base stamping and the graft decline of
// _insert_helper, LRU eviction of whole leaf nodes, lock references. cpu_ref/radix_cache.h is kvshard's
// page-granular model of the same cache (the simulator's); this one is compared with SGLang's code run for run.
#ifndef KVSHARD_CPU_REF_RADIX_TREE_H_
#define KVSHARD_CPU_REF_RADIX_TREE_H_

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "core/alloc_script.h"
#include "core/status.h"
#include "cpu_ref/allocator.h"

namespace kvshard::ref {

// A radix tree over page-aligned token keys whose values (KV locs) belong to an allocator.
class RadixTree {
 public:
  // The root's id; every other node id is stable while the node lives.
  static constexpr int64_t kRoot = 0;
  // match_prefix's answer.
  struct Match {
    std::vector<int64_t> indices;  // the matched locs, position order (SGLang's device_indices)
    int64_t last_node = kRoot;     // last_device_node
  };
  // insert's answer (SGLang's InsertResult).
  struct InsertResult {
    int64_t prefix_len = 0;  // tokens of the key already in the tree
    int64_t last_node = kRoot;
    bool rotation_tail_declined = false;
  };

  // The fields of SGLang's Req that cache_unfinished_req / cache_finished_req read and write.
  struct Req {
    std::vector<int64_t> fill_ids;  // origin_input_ids + output_ids (at least the tokens handled)
    std::vector<int64_t> row;       // req_to_token[req_pool_idx] (at least the KV handled)
    std::vector<int64_t> prefix_indices;
    int64_t cache_protected_len = 0;
    int64_t last_node = kRoot;
    int64_t kv_rotation_base = kNewChain;  // None: kNewChain
  };
  // What cache_unfinished_req / cache_finished_req did besides updating the Req.
  struct CacheResult {
    bool rotation_tail_declined = false;      // the insert's
    int64_t prefix_len = 0;                   // the insert's
    std::vector<std::vector<int64_t>> freed;  // each allocator free() call's pages (ascending), in call order
  };

  // `allocator` receives evicted locs and must outlive the tree; `page_size` is the match quantum.
  RadixTree(PageInterleaveAllocator* allocator, int64_t page_size);

  // match_prefix: the longest cached page-aligned prefix of `tokens` (splits the node the match ends inside).
  Match MatchPrefix(const std::vector<int64_t>& tokens);
  // insert of the page-aligned part of `tokens` with `values` (one loc per token); rotation_base kNewChain is
  // SGLang's None (an unsharded insert, never declined).
  InsertResult Insert(const std::vector<int64_t>& tokens, const std::vector<int64_t>& values, int64_t rotation_base);
  // evict: frees least-recently-used unlocked leaves, whole nodes, until `num_tokens` tokens went; returns how many.
  StatusOr<int64_t> Evict(int64_t num_tokens);
  // cache_unfinished_req of a request whose get_fill_ids() are its first `fill_len` fill_ids.
  StatusOr<CacheResult> CacheUnfinishedReq(Req& req, int64_t fill_len);
  // cache_finished_req(req, kv_len_to_handle = kv_len) (is_insert true).
  StatusOr<CacheResult> CacheFinishedReq(Req& req, int64_t kv_len);
  // True iff `node` is a node of the tree now (the root included).
  bool is_live(int64_t node) const {
    return node >= 0 && node < static_cast<int64_t>(nodes_.size()) && nodes_[node].live;
  }
  // inc_lock_ref / dec_lock_ref of the path node..root.
  void IncLockRef(int64_t node);
  void DecLockRef(int64_t node);
  // The node's rotation base (kNewChain for the root or an unsharded insert).
  int64_t rotation_base(int64_t node) const { return nodes_.at(node).rotation_base; }
  // SGLang's evictable_size_ and protected_size_ (tokens).
  int64_t evictable_size() const { return evictable_size_; }
  int64_t protected_size() const { return protected_size_; }
  // Tokens held by the tree (total_size).
  int64_t total_size() const;
  // The logical pages the tree's values cover.
  std::set<int64_t> Pages() const;
  // The pages the last Evict freed: one ascending list per node (one free() call each), in eviction order.
  const std::vector<std::vector<int64_t>>& last_evicted() const { return last_evicted_; }

 private:
  struct Node {
    int64_t parent = -1;
    std::map<std::vector<int64_t>, int64_t> children;  // keyed by the child's first page of tokens
    std::vector<int64_t> key, value;                   // tokens and their locs (equal lengths, page-aligned)
    int64_t lock_ref = 0;
    uint64_t last_access_time = 0;
    int64_t rotation_base = kNewChain;
    bool live = false;
  };
  // time.monotonic(): one strictly increasing tick per call SGLang makes.
  uint64_t Tick() { return ++clock_; }
  // TreeNode(): a fresh node (two clock reads: last_access_time, creation_time).
  int64_t NewNode();
  std::vector<int64_t> ChildKey(const std::vector<int64_t>& key, size_t at) const;
  // RadixKey.match rounded down to the page size.
  int64_t MatchLen(const std::vector<int64_t>& node_key, const std::vector<int64_t>& key, size_t at) const;
  int64_t SplitNode(int64_t child, int64_t split_len);
  void DeleteLeaf(int64_t node);
  // The allocator's free() of some locs (free_segment), recorded in *out; free_segments of one request's row.
  Status FreeSegment(const std::vector<int64_t>& locs, CacheResult* out);
  Status FreeSegments(const std::vector<std::pair<std::vector<int64_t>, int64_t>>& segments, CacheResult* out);

  PageInterleaveAllocator* allocator_;
  int64_t ps_;
  std::vector<Node> nodes_;  // nodes_[kRoot] is the root (lock_ref 1, never evicted); ids are never reused
  uint64_t clock_ = 0;
  int64_t evictable_size_ = 0, protected_size_ = 0;
  std::vector<std::vector<int64_t>> last_evicted_;
};

// Python's v[begin:end] for 0 <= begin: bounds clamped to the vector, an empty result where end <= begin.
std::vector<int64_t> Slice(const std::vector<int64_t>& v, int64_t begin, int64_t end);

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_RADIX_TREE_H_
