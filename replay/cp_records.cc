// The executors of the CP records (docs/trace-format.md, "CP shared-KV records"): the page compute owners, one rank's
// direct write and seed 003's helpers, each through replay/cp_results.h, so expect is checked against `split --mode
// owners --json` and the reference helpers. Stateless: no header section is needed.
#include <initializer_list>
#include <optional>
#include <string>

#include "replay/cp_results.h"
#include "replay/records.h"

namespace kvshard::replay {
namespace {

Int64List List(const Json& rec, const char* key) {
  return rec.contains(key) ? rec.at(key).get<Int64List>() : Int64List{};
}

bool Flag(const Json& rec, const char* key, bool fallback) {
  return rec.contains(key) ? rec.at(key).get<bool>() : fallback;
}

int64_t Int(const Json& rec, const char* key, int64_t fallback) {
  return rec.contains(key) ? rec.at(key).get<int64_t>() : fallback;
}

std::string Str(const Json& rec, const char* key, const char* fallback) {
  return rec.contains(key) ? rec.at(key).get<std::string>() : fallback;
}

std::optional<Int64List> OptList(const Json& rec, const char* key) {
  return rec.contains(key) ? std::optional<Int64List>(List(rec, key)) : std::nullopt;
}

// The forward-batch fields and server args the NSA padding helpers read (defaults: SGLang's stubs).
ref::CpForwardState ForwardState(const Json& rec) {
  ref::CpForwardState b;
  b.uses_cp_shared_kv = Flag(rec, "uses_cp_shared_kv", false);
  b.is_context_parallel_extend = Flag(rec, "is_context_parallel_extend", true);
  b.extend_seq_lens_cpu = OptList(rec, "extend_seq_lens_cpu");
  b.global_num_tokens_cpu = OptList(rec, "global_num_tokens_cpu");
  b.is_extend_in_batch = Flag(rec, "is_extend_in_batch", true);
  b.attention_dp_size = Int(rec, "attention_dp_size", 1);
  b.attention_dp_rank = Int(rec, "attention_dp_rank", 0);
  return b;
}

ref::CpServerArgs ServerArgs(const Json& rec) {
  ref::CpServerArgs args;
  args.enable_nsa_prefill_context_parallel = Flag(rec, "enable_nsa_prefill_context_parallel", true);
  args.nsa_prefill_cp_mode = Str(rec, "nsa_prefill_cp_mode", "in-seq-split");
  return args;
}

StatusOr<InSeqSplit> RecordSplit(const Json& rec, Impl impl) {
  const Int64List extend = List(rec, "extend_lens");
  const Int64List prefix = rec.contains("prefix_lens") ? List(rec, "prefix_lens") : Int64List(extend.size(), 0);
  return BuildInSeqSplit(extend, prefix, rec.at("page_size").get<int64_t>(), rec.at("cp_size").get<int64_t>(),
                         rec.contains("cp_rank") ? rec.at("cp_rank").get<int64_t>() : 0, impl);
}

}  // namespace

// The string choices of the CP data records (a value outside them is a malformed record).
Status CheckCpChoices(std::string_view name, const Json& rec) {
  auto check = [&](const char* key, std::initializer_list<const char*> choices) -> Status {
    if (!rec.contains(key)) return Status::Ok();
    const std::string v = rec.at(key).get<std::string>();
    for (const char* c : choices) {
      if (v == c) return Status::Ok();
    }
    return InvalidArgument(key, ": unsupported value ", QuoteInput(v));
  };
  if (name == "cp_split_rows" || name == "cp_pad_request") {
    KVSHARD_RETURN_IF_ERROR(check("mode", {"data", "1d", "position"}));
    return check("split_kind", {"compute", "valid"});
  }
  return name == "cp_last_tokens" ? check("mode", {"in-seq", "round-robin", "scalar"}) : Status::Ok();
}

// The fields of the cal_padded_tokens / pad_nsa_cache_seqlens records: the forward-batch fields and server args
// the NSA padding helpers read; global_num_tokens_cpu required or not, nsa_cache_seqlens with the padding.
std::vector<FieldShape> NsaPaddingFields(bool tokens_required, bool seqlens) {
  std::vector<FieldShape> f{{"cp_size", Shape::kInt, true},
                            {"global_num_tokens_cpu", Shape::kIntList, tokens_required},
                            {"extend_seq_lens_cpu", Shape::kIntList, false},
                            {"is_extend_in_batch", Shape::kBool, false},
                            {"attention_dp_size", Shape::kInt, false},
                            {"attention_dp_rank", Shape::kInt, false},
                            {"uses_cp_shared_kv", Shape::kBool, false},
                            {"is_context_parallel_extend", Shape::kBool, false},
                            {"nsa_prefill_cp_mode", Shape::kString, false},
                            {"enable_nsa_prefill_context_parallel", Shape::kBool, false}};
  if (seqlens) f.push_back({"nsa_cache_seqlens", Shape::kIntList, true});
  return f;
}

// A CP data record's batch (the in-seq plan's inputs, as page_owners) followed by `more`.
std::vector<FieldShape> CpBatchFields(std::vector<FieldShape> more) {
  std::vector<FieldShape> f{{"cp_size", Shape::kInt, true},
                            {"cp_rank", Shape::kInt, false},
                            {"page_size", Shape::kInt, true},
                            {"extend_lens", Shape::kIntList, true},
                            {"prefix_lens", Shape::kIntList, false}};
  f.insert(f.end(), more.begin(), more.end());
  return f;
}

StatusOr<Json> RunCanCpSplit(const Json& rec) {
  ref::CpForwardState b;
  b.uses_cp_shared_kv = Flag(rec, "uses_cp_shared_kv", false);
  b.is_context_parallel_extend = Flag(rec, "is_context_parallel_extend", true);
  b.sglang_cp_draft_shared_kv = Flag(rec, "sglang_cp_draft_shared_kv", false);
  b.is_draft_extend = Flag(rec, "is_draft_extend", false);
  if (rec.contains("extend_seq_lens_cpu")) b.extend_seq_lens_cpu = List(rec, "extend_seq_lens_cpu");
  if (rec.contains("extend_prefix_lens_cpu")) b.extend_prefix_lens_cpu = List(rec, "extend_prefix_lens_cpu");
  b.page_size = rec.contains("page_size") ? rec.at("page_size").get<int64_t>() : 0;
  ref::CpServerArgs args;
  args.enable_nsa_prefill_context_parallel = Flag(rec, "enable_nsa_prefill_context_parallel", true);
  if (rec.contains("nsa_prefill_cp_mode")) args.nsa_prefill_cp_mode = rec.at("nsa_prefill_cp_mode").get<std::string>();
  return CanCpSplitJson(rec.at("seq_len").get<int64_t>(), rec.at("cp_size").get<int64_t>(), Flag(rec, "use_nsa", true),
                        b, args);
}

StatusOr<Json> RunPageOwners(const Json& rec, Impl impl) {
  KVSHARD_ASSIGN_OR_RETURN(const InSeqSplit split, RecordSplit(rec, impl));
  return PageOwnersJson(split);
}

StatusOr<Json> RunCpDirectWrite(const Json& rec, Impl impl) {
  KVSHARD_ASSIGN_OR_RETURN(const InSeqSplit split, RecordSplit(rec, impl));
  const std::optional<int64_t> static_rows = rec.contains("extend_num_tokens")
                                                 ? std::optional<int64_t>(rec.at("extend_num_tokens").get<int64_t>())
                                                 : std::nullopt;
  if (static_rows && *static_rows < 0) return InvalidArgument("extend_num_tokens: must be >= 0, got ", *static_rows);
  return DirectWriteJson(split, List(rec, "out_cache_loc"), static_rows, "out_cache_loc");
}

StatusOr<Json> RunCpSeqIdx(const Json& rec) { return CpSeqIdxJson(List(rec, "cp_chunks_len"), List(rec, "seqs_len")); }

StatusOr<Json> RunCpLocalPair(const Json& rec) {
  return CpLocalPairJson(List(rec, "rows"), rec.at("prev_len").get<int64_t>(), rec.at("next_len").get<int64_t>());
}

StatusOr<Json> RunNsaSeqlens(const Json& rec) {
  return NsaSeqlensJson(List(rec, "seq_lens"), rec.at("nsa_index_topk").get<int64_t>());
}

StatusOr<Json> RunCalPaddedTokens(const Json& rec) {
  return CalPaddedTokensJson(ForwardState(rec), ServerArgs(rec), rec.at("cp_size").get<int64_t>());
}

StatusOr<Json> RunPadNsaCacheSeqlens(const Json& rec) {
  return PadNsaCacheSeqlensJson(ForwardState(rec), ServerArgs(rec), rec.at("cp_size").get<int64_t>(),
                                List(rec, "nsa_cache_seqlens"));
}

StatusOr<Json> RunRoundRobinRows(const Json& rec) {
  return RoundRobinRowsJson(List(rec, "rows"), rec.at("cp_size").get<int64_t>(), rec.at("cp_rank").get<int64_t>());
}

StatusOr<Json> RunSplitRows(const Json& rec, Impl impl) {
  KVSHARD_ASSIGN_OR_RETURN(const InSeqSplit split, RecordSplit(rec, impl));
  const std::optional<int64_t> static_rows =
      rec.contains("static_padded_tokens") ? std::optional<int64_t>(Int(rec, "static_padded_tokens", 0)) : std::nullopt;
  return SplitRowsJson(split, List(rec, "rows"), Str(rec, "mode", "data"), Str(rec, "split_kind", "compute"),
                       static_rows);
}

StatusOr<Json> RunPadRequest(const Json& rec) {
  return PadRequestJson(List(rec, "rows"), Int(rec, "row_width", 1), rec.at("target_len").get<int64_t>(),
                        Str(rec, "mode", "data"), Int(rec, "req_id", 0));
}

StatusOr<Json> RunValidRows(const Json& rec, Impl impl) {
  KVSHARD_ASSIGN_OR_RETURN(const InSeqSplit split, RecordSplit(rec, impl));
  return ValidRowsJson(split, List(rec, "rows"));
}

StatusOr<Json> RunLastTokens(const Json& rec, Impl impl) {
  const std::string mode = Str(rec, "mode", "in-seq");
  CpRowsBatch b;
  b.cp_size = rec.at("cp_size").get<int64_t>();
  b.page_size = Int(rec, "page_size", 1);
  b.extend_lens = List(rec, "extend_lens");
  b.prefix_lens = rec.contains("prefix_lens") ? List(rec, "prefix_lens") : Int64List(b.extend_lens.size(), 0);
  b.trim_tail = Int(rec, "trim_tail", 0);
  return LastTokensJson(b, List(rec, "rows"), mode, impl);
}

StatusOr<Json> RunPrepareMetadata(const Json& rec) {
  ref::CPPrepareInput in;
  in.kv_len = rec.at("kv_len").get<int64_t>();
  in.cp_rank = Int(rec, "cp_rank", 0);
  in.cp_size = rec.at("cp_size").get<int64_t>();
  in.uses_cp_shared_kv = Flag(rec, "uses_cp_shared_kv", false);
  in.extend_lens = List(rec, "extend_lens");
  in.prefix_lens = List(rec, "prefix_lens");
  if (rec.contains("page_size")) in.page_size = rec.at("page_size").get<int64_t>();
  return PrepareMetadataJson(in);
}

}  // namespace kvshard::replay
