// The CP records of one generated batch: the owner plan first (its answer gives the owner-class pages), then one
// rank's direct write, the chunk-to-request map, the split gate and the local pair split of one request.
#include "replay/trace_gen_cp.h"

#include <algorithm>

namespace kvshard::replay {
namespace {

// The batch's out_cache_loc over `pages` (request q's token t at pages[q][t / ps] * ps + t % ps).
std::vector<int64_t> Locs(const CpGenBatch& b, const std::vector<std::vector<int64_t>>& pages) {
  std::vector<int64_t> locs;
  for (size_t q = 0; q < b.extend_lens.size(); ++q) {
    for (int64_t t = 0; t < b.extend_lens[q]; ++t) {
      locs.push_back(pages[q][static_cast<size_t>(t / b.page_size)] * b.page_size + t % b.page_size);
    }
  }
  return locs;
}

// Pages of every request drawn from their compute owners' classes: page k * cp + owner, k counting from 1.
std::vector<std::vector<int64_t>> OwnerPages(const CpGenBatch& b, const Json& owners) {
  std::vector<int64_t> next(static_cast<size_t>(b.cp_size), 1);
  std::vector<std::vector<int64_t>> pages;
  for (const Json& request : owners.at("request_page_compute_owners")) {
    pages.emplace_back();
    for (const Json& o : request) pages.back().push_back(next[o.get<size_t>()]++ * b.cp_size + o.get<int64_t>());
  }
  return pages;
}

Json Lens(const CpGenBatch& b, const char* op) {
  return Json{{"op", op},
              {"cp_size", b.cp_size},
              {"page_size", b.page_size},
              {"extend_lens", b.extend_lens},
              {"prefix_lens", b.prefix_lens}};
}

Status DirectWrite(const CpGenBatch& b, const Json& owners, const CpGenHooks& h) {
  const bool owner_pages = h.uniform(0, 1) == 1;  // else the batch's own (rotated) pages: mostly a mismatch
  std::vector<int64_t> locs = Locs(b, owner_pages ? OwnerPages(b, owners) : b.new_pages);
  for (int64_t& loc : locs) {  // trash slots are kept and never owner-checked
    if (h.uniform(0, 15) == 0) loc = 0;
  }
  Json rec = Lens(b, "cp_direct_write");
  rec["cp_rank"] = h.uniform(0, b.cp_size - 1);
  if (h.uniform(0, 3) == 0) {  // trailing static padding rows, allowed up to extend_num_tokens
    const int64_t pad = h.uniform(1, 3);
    rec["extend_num_tokens"] = static_cast<int64_t>(locs.size()) + pad + h.uniform(b.edge_heavy ? -1 : 0, 1);
    locs.insert(locs.end(), static_cast<size_t>(pad), 0);
  }
  if (b.edge_heavy && h.uniform(0, 9) == 0) locs.push_back(0);  // one row more than the plan: a length mismatch
  rec["out_cache_loc"] = locs;
  return h.emit(rec).status();
}

Status SeqIdx(const CpGenBatch& b, const CpGenHooks& h) {
  int64_t total = 0;
  for (int64_t e : b.extend_lens) total += e;
  std::vector<int64_t> chunks;  // a random partition of the batch's tokens into at most 2 * cp chunks
  for (int64_t left = total, k = 2 * b.cp_size; left > 0; --k) {
    const int64_t len = k == 1 ? left : std::min(left, h.uniform(0, total / b.cp_size + 1));
    chunks.push_back(len);
    left -= len;
  }
  return h.emit(Json{{"op", "cp_seq_idx"}, {"cp_chunks_len", chunks}, {"seqs_len", b.extend_lens}}).status();
}

Status CanSplit(const CpGenBatch& b, const CpGenHooks& h) {
  int64_t total = 0;
  for (size_t q = 0; q < b.extend_lens.size(); ++q) total += b.prefix_lens[q] + b.extend_lens[q];
  Json rec{{"op", "can_cp_split"},
           {"seq_len", total},
           {"cp_size", b.cp_size},
           {"uses_cp_shared_kv", h.uniform(0, 1) == 1},
           {"extend_seq_lens_cpu", b.extend_lens},
           {"extend_prefix_lens_cpu", b.prefix_lens},
           {"page_size", b.page_size}};
  if (h.uniform(0, 3) == 0) rec["nsa_prefill_cp_mode"] = "round-robin-split";
  return h.emit(rec).status();
}

Status LocalPair(const CpGenBatch& b, const Json& split, const CpGenHooks& h) {
  if (!split.contains("request_valid_actual_seq_q_prev")) return Status::Ok();
  const size_t q = static_cast<size_t>(h.uniform(0, static_cast<int64_t>(b.extend_lens.size()) - 1));
  const int64_t prev = split.at("request_valid_actual_seq_q_prev")[q].get<int64_t>();
  const int64_t next = split.at("request_valid_actual_seq_q_next")[q].get<int64_t>();
  std::vector<int64_t> rows;
  const int64_t first = h.uniform(0, 1 << 20);
  for (int64_t i = 0; i < prev + next; ++i) rows.push_back(first + i);
  const int64_t off = b.edge_heavy && h.uniform(0, 9) == 0 ? 1 : 0;  // lengths that do not add up: the error
  return h.emit(Json{{"op", "cp_local_pair"}, {"rows", rows}, {"prev_len", prev}, {"next_len", next + off}}).status();
}

}  // namespace

Status EmitCpRecords(const CpGenBatch& b, const CpGenHooks& h) {
  if (h.full()) return Status::Ok();
  KVSHARD_ASSIGN_OR_RETURN(const Json owners, h.emit(Lens(b, "page_owners")));
  if (owners.is_null()) return Status::Ok();  // rejected (an empty extend): no owners to write
  if (h.full()) return Status::Ok();
  KVSHARD_RETURN_IF_ERROR(DirectWrite(b, owners, h));
  if (h.full()) return Status::Ok();
  KVSHARD_RETURN_IF_ERROR(SeqIdx(b, h));
  if (h.full()) return Status::Ok();
  KVSHARD_RETURN_IF_ERROR(CanSplit(b, h));
  if (b.split.is_null() || h.full()) return Status::Ok();
  return LocalPair(b, b.split, h);  // the split record's rank: its prev/next lengths
}

}  // namespace kvshard::replay
