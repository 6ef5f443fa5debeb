// The executors of the CP records (docs/trace-format.md, "CP shared-KV records"): the page compute owners, one rank's
// direct write and seed 003's helpers, each through replay/cp_results.h, so expect is checked against `split --mode
// owners --json` and the reference helpers. Stateless: no header section is needed.
#include <optional>

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

StatusOr<InSeqSplit> RecordSplit(const Json& rec, Impl impl) {
  const Int64List extend = List(rec, "extend_lens");
  const Int64List prefix = rec.contains("prefix_lens") ? List(rec, "prefix_lens") : Int64List(extend.size(), 0);
  return BuildInSeqSplit(extend, prefix, rec.at("page_size").get<int64_t>(), rec.at("cp_size").get<int64_t>(),
                         rec.contains("cp_rank") ? rec.at("cp_rank").get<int64_t>() : 0, impl);
}

}  // namespace

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

}  // namespace kvshard::replay
