// kvshard gen: writes a seeded synthetic trace (docs/trace-format.md) with expect filled by the reference;
// the same options give a byte-identical trace.
#include <fstream>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/memory_limit.h"
#include "cli/output_file.h"
#include "replay/replayer.h"
#include "replay/trace_gen.h"
#include "core/spec.h"

namespace kvshard::cli {
namespace {

void DeclareFlags(po::options_description& flags) {
  flags.add_options()("seed", NonNegative()->default_value(1), "PRNG seed")(
      "records", NonNegative()->default_value(1000), "records after the header")(
      "shard-size", Int(1, kMaxShardSize)->default_value(4), "N, ranks of the allocator and the gather plans")(
      "page-size", Int(1, kMaxPageSize)->default_value(16), "ps, tokens per physical page")(
      "pages-per-rank", Positive()->default_value(256), "allocatable pages per rank (excluding the trash page)")(
      "need-sort", po::bool_switch(), "frees go to release lists (SGLang's need_sort)")(
      "cp-size", Int(1, kMaxShardSize)->default_value(4), "context-parallel ranks of the split and rerange records")(
      "batch-size", Int(1, 4096)->default_value(8), "most requests per alloc batch")(
      "max-len", Int(1, int64_t{1} << 32)->default_value(512),
      "most tokens of a new request or an extension (at most 2^20 without --no-radix)")(
      "share-percent", Int(0, 100)->default_value(40),
      "chance (%) that a request extends a live chain or revisits a recent document")(
      "edge-heavy", po::bool_switch(),
      "lengths at page and CP edges, one-request batches, capacities at and one page under the bound")(
      "layers", Int(0, 4096)->default_value(2),
      "pool layers: each committed batch runs begin_shard_extend, per layer set_kv_buffer and get_key_buffer, "
      "end_shard_extend; 0 writes no pipeline records and no header \"pool\"")(
      "row-words", Int(1, 4096)->default_value(4), "32-bit words per KV row of the header's pool")(
      "no-radix", po::bool_switch(),
      "no radix cache records: every request is an allocator chain (without it, about half the requests are "
      "document requests: match_prefix with lock, alloc, insert, tail free, dec_lock_ref; evict on deferral)")(
      "cp-records", po::bool_switch(),
      "per committed batch also the CP records: page_owners, cp_direct_write (a random rank, on the batch's "
      "out_cache_loc or on owner-class pages), cp_seq_idx, can_cp_split, cp_local_pair")(
      "allocator-only", po::bool_switch(),
      "only the allocator's records (alloc, free, free_group): implies --no-radix and --layers 0")(
      "out", po::value<std::string>()->value_name("FILE"), "write the trace here instead of standard output");
  DeclareMaxMemoryFlag(flags);
}

// The generator's own documents, chains and radix cache: flat in --records (9 MB measured at the defaults and
// at 40,000 records).
constexpr int64_t kGeneratorStateBytes = int64_t{16} << 20;

// The flag a memory refusal names: of the flags behind the largest term (the allocator's pages, the pools' KV rows,
// the scratch rows), the first one given, else the first.
std::string GenMemoryFlag(const std::vector<MemoryTerm>& terms, const Flags& flags) {
  static const std::map<std::string, std::vector<std::string>> kFlagsOfTerm = {
      {"logical pages", {"pages-per-rank", "shard-size"}},
      {"KV rows", {"layers", "row-words", "pages-per-rank", "page-size", "shard-size"}},
      {"scratch rows", {"row-words", "max-len", "batch-size", "pages-per-rank", "page-size", "shard-size"}},
  };
  const MemoryTerm* largest = nullptr;
  for (const MemoryTerm& t : terms) {
    if (!kFlagsOfTerm.count(t.unit)) continue;
    if (!largest || SatMul(t.count, t.bytes_per) > SatMul(largest->count, largest->bytes_per)) largest = &t;
  }
  if (!largest) return "--pages-per-rank";
  const std::vector<std::string>& names = kFlagsOfTerm.at(largest->unit);
  for (const std::string& name : names) {
    if (flags.Given(name)) return "--" + name;
  }
  return "--" + names.front();
}

// The reference state the generator keeps (the allocator of N * (pages_per_rank + 1) pages and, with --layers,
// the pools sized by the header's scratch bound), checked against --max-memory before any is built.
Status CheckGenMemory(const replay::TraceGenOptions& o, const Flags& flags, const MemoryBudget& budget) {
  replay::PoolGeometry pool;
  if (o.num_layers > 0) {
    const replay::ScratchBound bound = replay::TraceGenScratchBound(o);
    pool.shard_size = o.shard_size;
    pool.page_size = o.page_size;
    pool.pages_per_rank = o.pages_per_rank;
    pool.max_prefix_tokens = bound.max_prefix_tokens;
    pool.chunk_tokens = bound.chunk_tokens;
    pool.num_layers = o.num_layers;
    pool.row_words = o.row_words;
  }
  std::vector<MemoryTerm> terms =
      replay::ReplayMemoryTerms(o.shard_size, o.page_size, o.pages_per_rank, o.num_layers > 0 ? &pool : nullptr);
  terms.push_back({1, "generator state", kGeneratorStateBytes});
  return budget.Check(GenMemoryFlag(terms, flags), "generator's allocator and pools", terms);
}

Status RunGen(const Flags& flags, std::ostream& out) {
  replay::TraceGenOptions o;
  o.seed = static_cast<uint64_t>(flags.Int("seed"));
  o.records = flags.Int("records");
  o.shard_size = flags.Int("shard-size");
  o.page_size = flags.Int("page-size");
  o.pages_per_rank = flags.Int("pages-per-rank");
  o.need_sort = flags.Bool("need-sort");
  o.cp_size = flags.Int("cp-size");
  o.batch_size = flags.Int("batch-size");
  o.max_len = flags.Int("max-len");
  o.share_percent = flags.Int("share-percent");
  o.edge_heavy = flags.Bool("edge-heavy");
  o.num_layers = flags.Int("layers");
  o.row_words = flags.Int("row-words");
  o.radix = !flags.Bool("no-radix");
  o.cp_records = flags.Bool("cp-records");
  o.allocator_only = flags.Bool("allocator-only");
  if (o.allocator_only) {
    o.radix = false;
    if (!flags.Given("layers")) o.num_layers = 0;
  }
  KVSHARD_RETURN_IF_ERROR(replay::ValidateTraceGenOptions(o));
  KVSHARD_RETURN_IF_ERROR(CheckGenMemory(o, flags, Budget(flags)));
  if (!flags.Has("out")) return replay::GenerateTrace(o, out);
  // Written beside the file and renamed over it once whole: a failed run leaves no partial trace ("-": out).
  KVSHARD_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> file, OutputFile::Open("out", flags.String("out"), out));
  KVSHARD_RETURN_IF_ERROR(replay::GenerateTrace(o, file->stream()));
  return file->Commit();
}

// The generator's errors name TraceGenOptions fields; gen says them as its flags.
Status Run(const Flags& flags, std::ostream& out) {
  static const FlagNames names = {{"records", "records"},        {"shard_size", "shard-size"},
                                  {"page_size", "page-size"},    {"pages_per_rank", "pages-per-rank"},
                                  {"cp_size", "cp-size"},        {"batch_size", "batch-size"},
                                  {"max_len", "max-len"},        {"share_percent", "share-percent"},
                                  {"num_layers", "layers"},      {"row_words", "row-words"},
                                  {"radix = false", "no-radix"}, {"allocator_only", "allocator-only"},
                                  {"cp_records", "cp-records"}};
  return SpellFlags(RunGen(flags, out), names);
}

}  // namespace

Command GenCommand() {
  return {"gen", "write a seeded synthetic trace, expect filled by the reference (same seed, same bytes)",
          "[--seed INT] [--records INT] [--shard-size INT] [--page-size INT] [--cp-size INT] [--batch-size INT] "
          "[--edge-heavy] [--layers INT] [--row-words INT] [--no-radix] [--cp-records] [--allocator-only] [--out FILE] "
          "[--max-memory BYTES]",
          DeclareFlags, Run};
}

}  // namespace kvshard::cli
