// Reference CP helpers of seed 003 (nsa/utils.py) beside the planners: the local prev/next pair split, the
// embedding padding to max_rank_len[0], NSA seq-len clamping and padding, calculate_cp_seq_idx and the CP split
// eligibility gates (can_cp_split and what it calls). Pure functions on the forward-batch fields they read.
#ifndef KVSHARD_CPU_REF_CP_HELPERS_H_
#define KVSHARD_CPU_REF_CP_HELPERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/cp_plan.h"
#include "core/host_tensor.h"
#include "core/status.h"

namespace kvshard::ref {

// The server arguments the CP gates read (get_global_server_args()).
struct CpServerArgs {
  bool enable_nsa_prefill_context_parallel = true;
  std::string nsa_prefill_cp_mode = "in-seq-split";  // "in-seq-split" | "round-robin-split"
};

// is_nsa_prefill_cp_in_seq_split: CP enabled and mode in-seq-split.
bool IsNsaPrefillCpInSeqSplit(const CpServerArgs& args);
// is_nsa_prefill_cp_round_robin_split: CP enabled and mode round-robin-split.
bool IsNsaPrefillCpRoundRobinSplit(const CpServerArgs& args);

// The forward-batch fields the gates and padding helpers read (None = std::nullopt).
struct CpForwardState {
  bool uses_cp_shared_kv = false;
  bool is_context_parallel_extend = true;  // forward_mode.is_context_parallel_extend()
  bool sglang_cp_draft_shared_kv = false;  // envs.SGLANG_CP_DRAFT_SHARED_KV
  bool is_draft_extend = false;            // forward_mode.is_draft_extend(include_v2=True)
  std::optional<Int64List> extend_seq_lens_cpu;
  std::optional<Int64List> extend_prefix_lens_cpu;
  int64_t page_size = 0;  // token_to_kv_pool.page_size (0 when absent)
  std::optional<Int64List> global_num_tokens_cpu;
  bool is_extend_in_batch = true;  // read by DpPaddingMode.get_dp_padding_mode
  int64_t attention_dp_size = 1;   // get_attention_dp_size()
  int64_t attention_dp_rank = 0;   // get_attention_dp_rank()
};

// SGLang split_in_seq_cp_local_pair: rows [0, prev_len) and [prev_len, prev_len+next_len) of a rank's local rows
// (never halves). Error "<name> local in-seq CP length mismatch: actual=..., expected=..., prev_len=...,
// next_len=..." unless rows == prev_len + next_len.
StatusOr<std::pair<HostTensor, HostTensor>> SplitInSeqCpLocalPair(const HostTensor& input, int64_t prev_len,
                                                                  int64_t next_len, const std::string& name = "input");

// SGLang get_cp_local_embedding_padded_token_count: max_rank_len[0], or None without metadata / max_rank_len, or
// when it is below local_num_tokens.
std::optional<int64_t> GetCpLocalEmbeddingPaddedTokenCount(const NSAContextParallelMetadata* metadata,
                                                           int64_t local_num_tokens);

// SGLang pad_cp_local_input_ids_for_embedding: the ids padded with pad_token_id to that count (None as above).
std::optional<Int64List> PadCpLocalInputIdsForEmbedding(const NSAContextParallelMetadata* metadata,
                                                        const Int64List& local_input_ids, int64_t pad_token_id = 0);

// SGLang compute_nsa_seqlens: every length clamped to at most nsa_index_topk.
Int64List ComputeNsaSeqlens(const Int64List& original_seq_lens, int64_t nsa_index_topk);

// SGLang _fail_if_cp_shared_kv_round_robin: tag round_robin_unsupported for a shared-KV batch in round-robin mode.
Status FailIfCpSharedKVRoundRobin(const CpForwardState& batch, const CpServerArgs& args, const std::string& op);

// SGLang can_nsa_prefill_cp_round_robin_split (CP extend, round-robin mode, 0 < tokens, tokens >= N > 1).
StatusOr<bool> CanNsaPrefillCpRoundRobinSplit(const CpForwardState& batch, const CpServerArgs& args, int64_t cp_size);

// DpPaddingMode.get_dp_padding_mode(...).is_max_len() (upstream layers/dp_attention.py, NSA era): SUM_LEN for an
// extend batch with DP > 1, else MAX_LEN iff 2 * sum(tokens) >= max(tokens) * dp_size. `tokens` is not empty.
bool DpPaddingModeIsMaxLen(bool is_extend_in_batch, const Int64List& tokens, int64_t dp_size);

// SGLang cal_padded_tokens: global_num_tokens ceil-aligned to N; max (MAX_LEN) or this DP rank's entry; divided by
// N (rounded up) when the round-robin split applies.
StatusOr<int64_t> CalPaddedTokens(const CpForwardState& batch, const CpServerArgs& args, int64_t cp_size);

// SGLang pad_nsa_cache_seqlens: zero-pads the seq lens to cal_padded_tokens when round-robin CP or DP padding
// applies, else returns them unchanged.
StatusOr<Int64List> PadNsaCacheSeqlens(const CpForwardState& batch, const CpServerArgs& args, int64_t cp_size,
                                       const Int64List& nsa_cache_seqlens);

// SGLang _validate_cp_shared_kv_cp_split_plan_inputs: true iff a shared-KV batch with N > 1 has valid plan inputs
// and at least one extend token. Tags cp_split_missing_page_plan_inputs, cp_split_length_mismatch,
// cp_split_negative_len, cp_split_non_page_aligned_prefix.
StatusOr<bool> ValidateCpSharedKVCpSplitPlanInputs(const CpForwardState& batch, int64_t cp_size);

// SGLang can_cp_split: shared-KV batches need valid plan inputs and >= 1 extend token; others seq_len // 2N > 0
// and >= N extend tokens; round-robin requires seq_len % N == 0 (error otherwise). Always false unless N > 1,
// use_nsa, CP extend (or shared-KV draft extend) and CP enabled.
StatusOr<bool> CanCpSplit(int64_t seq_len, int64_t cp_size, bool use_nsa, const CpForwardState& batch,
                          const CpServerArgs& args);

// One request's share of a CP chunk: tokens [start, end) of request seq_idx (SGLang's (idx, prev, cur) tuple).
struct CpSeqSpan {
  int64_t seq_idx = 0;
  int64_t start = 0;
  int64_t end = 0;
  bool operator==(const CpSeqSpan&) const = default;
};

// SGLang calculate_cp_seq_idx: for each chunk length, the requests it covers walking seqs_len in order (a request
// longer than the chunk continues into the next chunk). Lengths must be within +-kMaxCpTokens (named field).
StatusOr<std::vector<std::vector<CpSeqSpan>>> CalculateCpSeqIdx(const Int64List& cp_chunks_len, Int64List seqs_len);

// Python's repr of an int list, "[1, 2]" ("None" for nullopt), as SGLang's messages print it.
std::string PyListRepr(const std::optional<Int64List>& v);

}  // namespace kvshard::ref

#endif  // KVSHARD_CPU_REF_CP_HELPERS_H_
