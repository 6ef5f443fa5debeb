// Reference CP helpers (seed 003 nsa/utils.py), each a transcription of its SGLang function; SGLang's
// RuntimeErrors keep their tags, its asserts and TypeErrors become InvalidArgument naming the field.
#include "cpu_ref/cp_helpers.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "core/cp_limits.h"

namespace kvshard::ref {
namespace {

HostTensor Rows(const HostTensor& t, int64_t begin, int64_t count) {
  HostTensor out = HostTensor::Zeros(count, t.row_bytes);
  if (count > 0) std::memcpy(out.data.data(), t.row(begin), static_cast<size_t>(count * t.row_bytes));
  return out;
}

StatusOr<int64_t> SumExtend(const CpForwardState& batch) {
  if (!batch.extend_seq_lens_cpu) return InvalidArgument("extend_seq_lens_cpu: missing (SGLang sums it)");
  int64_t sum = 0;
  for (int64_t e : *batch.extend_seq_lens_cpu) {
    if (e < -kMaxCpTokens || e > kMaxCpTokens) return InvalidArgument("extend_seq_lens_cpu: ", e, " out of range");
    sum += e;
  }
  return sum;
}

bool IsSharedKVDraftExtend(const CpForwardState& b) {
  return b.uses_cp_shared_kv && b.sglang_cp_draft_shared_kv && b.is_draft_extend;
}

}  // namespace

bool IsNsaPrefillCpInSeqSplit(const CpServerArgs& a) {
  return a.enable_nsa_prefill_context_parallel && a.nsa_prefill_cp_mode == "in-seq-split";
}

bool IsNsaPrefillCpRoundRobinSplit(const CpServerArgs& a) {
  return a.enable_nsa_prefill_context_parallel && a.nsa_prefill_cp_mode == "round-robin-split";
}

std::string PyListRepr(const std::optional<Int64List>& v) {
  if (!v) return "None";
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < v->size(); ++i) s << (i ? ", " : "") << (*v)[i];
  s << "]";
  return s.str();
}

StatusOr<std::pair<HostTensor, HostTensor>> SplitInSeqCpLocalPair(const HostTensor& input, int64_t prev_len,
                                                                  int64_t next_len, const std::string& name) {
  KVSHARD_RETURN_IF_ERROR(ValidateHostTensor(input, name.c_str()));
  const bool in_range = prev_len >= 0 && next_len >= 0 && prev_len <= kMaxCpTokens && next_len <= kMaxCpTokens;
  if (!in_range || prev_len + next_len != input.rows) {
    return InvalidArgument(name, " local in-seq CP length mismatch: actual=", input.rows,
                           ", expected=", prev_len + next_len, ", prev_len=", prev_len, ", next_len=", next_len);
  }
  return std::make_pair(Rows(input, 0, prev_len), Rows(input, prev_len, next_len));
}

std::optional<int64_t> GetCpLocalEmbeddingPaddedTokenCount(const NSAContextParallelMetadata* metadata,
                                                           int64_t local_num_tokens) {
  if (metadata == nullptr || metadata->max_rank_len.empty()) return std::nullopt;
  const int64_t padded = metadata->max_rank_len[0];
  if (padded < local_num_tokens) return std::nullopt;
  return padded;
}

std::optional<Int64List> PadCpLocalInputIdsForEmbedding(const NSAContextParallelMetadata* metadata,
                                                        const Int64List& local_input_ids, int64_t pad_token_id) {
  const int64_t local = static_cast<int64_t>(local_input_ids.size());
  const std::optional<int64_t> padded = GetCpLocalEmbeddingPaddedTokenCount(metadata, local);
  if (!padded || *padded > kMaxCpTokens) return std::nullopt;
  Int64List ids = local_input_ids;
  ids.resize(static_cast<size_t>(*padded), pad_token_id);
  return ids;
}

Int64List ComputeNsaSeqlens(const Int64List& original_seq_lens, int64_t nsa_index_topk) {
  Int64List out;
  for (int64_t len : original_seq_lens) out.push_back(std::min(len, nsa_index_topk));
  return out;
}

Status FailIfCpSharedKVRoundRobin(const CpForwardState& batch, const CpServerArgs& args, const std::string& op) {
  if (!batch.uses_cp_shared_kv || !IsNsaPrefillCpRoundRobinSplit(args)) return Status::Ok();
  return FailFast("round_robin_unsupported", "CP shared KV only supports in-seq zigzag split. op=", op,
                  " nsa_prefill_cp_mode=round-robin-split");
}

StatusOr<bool> CanNsaPrefillCpRoundRobinSplit(const CpForwardState& batch, const CpServerArgs& args, int64_t cp_size) {
  KVSHARD_RETURN_IF_ERROR(FailIfCpSharedKVRoundRobin(batch, args, "can_nsa_prefill_cp_round_robin_split"));
  if (!batch.is_context_parallel_extend) return false;
  KVSHARD_ASSIGN_OR_RETURN(const int64_t seq_len, SumExtend(batch));
  return IsNsaPrefillCpRoundRobinSplit(args) && seq_len > 0 && seq_len >= cp_size && cp_size > 1;
}

bool DpPaddingModeIsMaxLen(bool is_extend_in_batch, const Int64List& tokens, int64_t dp_size) {
  if (is_extend_in_batch && dp_size > 1) return false;
  int64_t sum = 0;
  for (int64_t t : tokens) sum += t;
  return sum * 2 >= *std::max_element(tokens.begin(), tokens.end()) * dp_size;
}

StatusOr<int64_t> CalPaddedTokens(const CpForwardState& batch, const CpServerArgs& args, int64_t cp_size) {
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  if (!batch.global_num_tokens_cpu || batch.global_num_tokens_cpu->empty()) {
    return InvalidArgument("global_num_tokens_cpu: missing or empty (cal_padded_tokens reads it)");
  }
  Int64List tokens = *batch.global_num_tokens_cpu;
  for (int64_t& t : tokens) {
    if (t < 0 || t > kMaxCpTokens) return InvalidArgument("global_num_tokens_cpu: ", t, " out of range");
    t = (t + cp_size - 1) / cp_size * cp_size;  // ceil_align
  }
  constexpr int64_t kMaxDpSize = 1024;  // DP groups and sizes past this would overflow the padding mode's sums
  if (tokens.size() > kMaxDpSize) return InvalidArgument("global_num_tokens_cpu: more than ", kMaxDpSize, " entries");
  if (batch.attention_dp_size < 1 || batch.attention_dp_size > kMaxDpSize) {
    return InvalidArgument("attention_dp_size: ", batch.attention_dp_size, " not in [1, ", kMaxDpSize, "]");
  }
  int64_t padded = tokens[0];
  if (DpPaddingModeIsMaxLen(batch.is_extend_in_batch, tokens, batch.attention_dp_size)) {
    padded = *std::max_element(tokens.begin(), tokens.end());
  } else if (tokens.size() > 1) {
    if (batch.attention_dp_rank < 0 || batch.attention_dp_rank >= static_cast<int64_t>(tokens.size())) {
      return InvalidArgument("attention_dp_rank: ", batch.attention_dp_rank, " not in [0, ", tokens.size(), ")");
    }
    padded = tokens[batch.attention_dp_rank];
  }
  KVSHARD_ASSIGN_OR_RETURN(const bool round_robin, CanNsaPrefillCpRoundRobinSplit(batch, args, cp_size));
  if (round_robin) padded = (padded + cp_size - 1) / cp_size;
  return padded;
}

StatusOr<Int64List> PadNsaCacheSeqlens(const CpForwardState& batch, const CpServerArgs& args, int64_t cp_size,
                                       const Int64List& nsa_cache_seqlens) {
  bool needs_cp_pad = false;
  if (cp_size > 1) {
    KVSHARD_ASSIGN_OR_RETURN(needs_cp_pad, CanNsaPrefillCpRoundRobinSplit(batch, args, cp_size));
  }
  if (!needs_cp_pad && !batch.global_num_tokens_cpu) return nsa_cache_seqlens;
  KVSHARD_ASSIGN_OR_RETURN(const int64_t tokens, CalPaddedTokens(batch, args, cp_size));
  Int64List out = nsa_cache_seqlens;
  if (tokens > static_cast<int64_t>(out.size())) out.resize(static_cast<size_t>(tokens), 0);
  return out;
}

StatusOr<bool> ValidateCpSharedKVCpSplitPlanInputs(const CpForwardState& batch, int64_t cp_size) {
  if (!batch.uses_cp_shared_kv || cp_size <= 1) return false;
  const auto& extend = batch.extend_seq_lens_cpu;
  const auto& prefix = batch.extend_prefix_lens_cpu;
  const int64_t ps = std::max<int64_t>(batch.page_size, 0);
  if (!extend || !prefix || ps <= 0) {
    return FailFast("cp_split_missing_page_plan_inputs",
                    "CP shared KV NSA in-seq split requires extend lengths, prefix lengths, and "
                    "token_to_kv_pool.page_size before planning. extend_seq_lens_cpu=",
                    PyListRepr(extend), " extend_prefix_lens_cpu=", PyListRepr(prefix), " page_size=", ps,
                    " cp_size=", cp_size);
  }
  if (extend->size() != prefix->size()) {
    return FailFast("cp_split_length_mismatch",
                    "CP shared KV NSA in-seq split requires one prefix length per extend length. "
                    "extend_seq_lens_cpu=",
                    PyListRepr(extend), " extend_prefix_lens_cpu=", PyListRepr(prefix), " cp_size=", cp_size);
  }
  bool has_extend = false;
  for (size_t q = 0; q < extend->size(); ++q) {
    const int64_t e = (*extend)[q], p = (*prefix)[q];
    if (e < 0 || p < 0) {
      return FailFast("cp_split_negative_len", "CP shared KV NSA in-seq split received a negative length. req_id=", q,
                      " prefix_len=", p, " extend_len=", e, " page_size=", ps, " cp_size=", cp_size);
    }
    if (p % ps != 0) {
      return FailFast("cp_split_non_page_aligned_prefix",
                      "CP shared KV NSA in-seq split requires a page-aligned prefix. The radix/HiCache match path "
                      "should floor cache hits to the previous page boundary before CP split planning. req_id=",
                      q, " prefix_len=", p, " extend_len=", e, " page_size=", ps, " cp_size=", cp_size);
    }
    has_extend = has_extend || e > 0;
  }
  return has_extend;
}

StatusOr<bool> CanCpSplit(int64_t seq_len, int64_t cp_size, bool use_nsa, const CpForwardState& batch,
                          const CpServerArgs& args) {
  KVSHARD_RETURN_IF_ERROR(FailIfCpSharedKVRoundRobin(batch, args, "can_cp_split"));
  KVSHARD_RETURN_IF_ERROR(ValidateCpSize(cp_size));
  // SGLang reads seq_len with Python's floor division; a negative one (a negative extend summed) is not rejected.
  if (seq_len < -kMaxCpTokens || seq_len > kMaxCpTokens) return InvalidArgument("seq_len: ", seq_len, " out of range");
  int64_t cur_cp_seq_len = 0;
  if (IsNsaPrefillCpRoundRobinSplit(args)) {
    if (seq_len % cp_size != 0) {
      return InvalidArgument("seq_len: ", seq_len, " is not divisible by cp_size ", cp_size,
                             " when nsa_prefill_cp_mode is round-robin-split");
    }
    cur_cp_seq_len = seq_len / cp_size;
  } else if (batch.uses_cp_shared_kv) {
    KVSHARD_ASSIGN_OR_RETURN(const bool valid, ValidateCpSharedKVCpSplitPlanInputs(batch, cp_size));
    cur_cp_seq_len = valid ? 1 : 0;
  } else {
    const int64_t d = cp_size * 2;  // Python's seq_len // d (floor)
    cur_cp_seq_len = seq_len / d - (seq_len % d != 0 && seq_len < 0 ? 1 : 0);
  }
  KVSHARD_ASSIGN_OR_RETURN(const int64_t extend_tokens, SumExtend(batch));
  const int64_t min_extend_tokens = batch.uses_cp_shared_kv ? 1 : cp_size;
  const bool cp_extend = batch.is_context_parallel_extend || IsSharedKVDraftExtend(batch);
  return cur_cp_seq_len != 0 && cp_size > 1 && use_nsa && cp_extend && args.enable_nsa_prefill_context_parallel &&
         extend_tokens >= min_extend_tokens;
}

StatusOr<std::vector<std::vector<CpSeqSpan>>> CalculateCpSeqIdx(const Int64List& cp_chunks_len, Int64List seqs_len) {
  for (int64_t v : cp_chunks_len) {
    if (v < -kMaxCpTokens || v > kMaxCpTokens) return InvalidArgument("cp_chunks_len: ", v, " out of range");
  }
  for (int64_t v : seqs_len) {
    if (v < -kMaxCpTokens || v > kMaxCpTokens) return InvalidArgument("seqs_len: ", v, " out of range");
  }
  std::vector<std::vector<CpSeqSpan>> out;
  std::vector<int64_t> cumulative(seqs_len.size(), 0);
  size_t j = 0;
  for (int64_t c_val : cp_chunks_len) {
    std::vector<std::pair<size_t, int64_t>> current;  // (idx, value) in insertion order (SGLang's dict)
    while (j < seqs_len.size()) {
      const int64_t s_val = seqs_len[j];
      if (s_val == c_val) {
        current.emplace_back(j, s_val);
        cumulative[j] += s_val;
        ++j;
        break;
      }
      if (s_val > c_val) {
        current.emplace_back(j, c_val);
        cumulative[j] += c_val;
        seqs_len[j] = s_val - c_val;
        break;
      }
      current.emplace_back(j, s_val);
      cumulative[j] += s_val;
      c_val -= s_val;
      ++j;
    }
    std::vector<CpSeqSpan> spans;
    for (const auto& [idx, val] : current) {
      spans.push_back({static_cast<int64_t>(idx), cumulative[idx] - val, cumulative[idx]});
    }
    out.push_back(std::move(spans));
  }
  return out;
}

}  // namespace kvshard::ref
