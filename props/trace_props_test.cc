// Trace properties (docs/trace-format.md): every `kvshard gen` trace replays clean on the reference, with and
// without its pipeline and radix records; a corrupted expect scalar anywhere, and in particular in a pipeline or
// radix cache record, is reported at its line; work done ahead on the read-ahead thread changes no outcome; reading
// and re-writing a trace is the identity.
#include <algorithm>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "replay/host_pool_path.h"
#include "replay/replayer.h"
#include "replay/trace_gen.h"
#include "core/trace.h"
#include "props/property.h"
#include "props/rc_status.h"
#include "props/trace_testing.h"

namespace kvshard::props {
namespace {

using replay::TraceGenOptions;

const std::vector<std::string>& PipelineOps() {
  static const auto* ops =
      new std::vector<std::string>{"begin_shard_extend", "set_kv_buffer", "get_key_buffer", "end_shard_extend"};
  return *ops;
}

const std::vector<std::string>& RadixOps() {
  static const auto* ops = new std::vector<std::string>{"match_prefix", "dec_lock_ref", "insert", "evict"};
  return *ops;
}

// Replays `text` on the reference; returns the first mismatch status (OK when clean) and counts records.
Status ReplayText(const std::string& text, int64_t* records) {
  ReplayCounts counts;
  KVSHARD_RETURN_IF_ERROR(ReplayTraceText(text, PropertyReplayOptions(), &counts));
  *records = counts.records;
  return Status::Ok();
}

std::string Generate(const TraceGenOptions& o) {
  std::ostringstream out;
  RC_ASSERT_OK(replay::GenerateTrace(o, out));
  return out.str();
}

KVSHARD_PROP(TraceProps, GeneratedTracesReplayClean, ()) {
  const TraceGenOptions o = ArbitraryTraceGenOptions();
  const std::string text = Generate(o);
  RC_TAG(o.edge_heavy ? "edge-heavy" : "plain");
  RC_CLASSIFY(text.find("\"error\":") != std::string::npos, "has rejected records");
  RC_CLASSIFY(text.find("\"ok\":false") != std::string::npos, "has deferred batches");
  RC_CLASSIFY(HasOp(text, "begin_shard_extend"), "has pipeline records");
  RC_CLASSIFY(text.find("\"declined\":true") != std::string::npos, "has declined grafts");
  RC_CLASSIFY(HasOp(text, "evict"), "has evictions");
  // The options decide the header's pool and which records may appear.
  RC_ASSERT((Lines(text).at(0).find("\"pool\":") != std::string::npos) == (o.num_layers > 0));
  for (const std::string& op : PipelineOps()) RC_ASSERT(o.num_layers > 0 || !HasOp(text, op));
  for (const std::string& op : RadixOps()) RC_ASSERT(o.radix || !HasOp(text, op));
  // Only the CP plans and the gather plans' edge capacities are meant to be rejected: the generated serving loop
  // (allocs, frees, the cache, the pipeline under the header's pool) never is.
  for (const std::string& line : Lines(text)) {
    if (line.find("\"expect\":{\"error\"") == std::string::npos) continue;
    RC_LOG() << line << "\n";
    const std::string op = OpOf(line);
    RC_ASSERT(op == "gather_plan" || op == "split" || op == "rerange");
  }
  int64_t records = 0;
  RC_ASSERT_OK(ReplayText(text, &records));
  RC_ASSERT(records == o.records);
}

// A generated trace's expects are the replayer's own answers (docs/trace-format.md), so replaying it clean pins
// nothing about them: here the pipeline's answers are checked against their definitions instead. A begin's
// out_cache_loc is its requests' slots of positions [prefix_len, seq_len), page by page (slot = page * ps + pos % ps);
// a default write's owned_counts counts those slots by owner (logical page l on rank l % N); a default read's
// scratch_rows is every slot of positions [0, seq_len) at its page's scratch page (the begin's page_pos pairs).
KVSHARD_PROP(TraceProps, GeneratedPipelineAnswersAreTheirDefinitions, ()) {
  const std::vector<std::string> lines = Lines(ArbitraryPipelineTrace(120, 3));
  const Json header = Json::parse(lines.at(0));
  const int64_t n = header.at("allocator").at("shard_size").get<int64_t>();
  const int64_t ps = header.at("allocator").at("page_size").get<int64_t>();
  std::vector<int64_t> chunk, all;
  std::map<int64_t, int64_t> scratch_page;  // logical page -> scratch page, of the extend in flight
  int64_t begins = 0, writes = 0, reads = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const Json rec = Json::parse(lines[i]);
    const std::string op = rec.at("op").get<std::string>();
    if (!rec.contains("expect") || rec.at("expect").contains("error")) continue;
    const Json& expect = rec.at("expect");
    if (op == "begin_shard_extend") {
      chunk.clear(), all.clear(), scratch_page.clear();
      for (const Json& r : rec.at("requests")) {
        const int64_t prefix_len = r.at("prefix_len").get<int64_t>(), seq_len = r.at("seq_len").get<int64_t>();
        const std::vector<int64_t> pages = r.at("pages").get<std::vector<int64_t>>();
        for (int64_t pos = 0; pos < seq_len && pos / ps < static_cast<int64_t>(pages.size()); ++pos) {
          all.push_back(pages[pos / ps] * ps + pos % ps);
          if (pos >= prefix_len) chunk.push_back(all.back());
        }
      }
      for (const Json& pair : expect.at("page_pos"))
        scratch_page[pair.at(0).get<int64_t>()] = pair.at(1).get<int64_t>();
      RC_ASSERT(expect.at("out_cache_loc").get<std::vector<int64_t>>() == chunk);
      ++begins;
    } else if (op == "set_kv_buffer" && !rec.contains("locs") && expect.contains("owned_counts")) {
      std::vector<int64_t> counts(n, 0);
      for (int64_t slot : chunk) ++counts[(slot / ps) % n];
      RC_ASSERT(expect.at("owned_counts").get<std::vector<int64_t>>() == counts);
      ++writes;
    } else if (op == "get_key_buffer" && !rec.contains("locs") && expect.contains("scratch_rows")) {
      std::vector<int64_t> rows;
      for (int64_t slot : all) {
        const auto at = scratch_page.find(slot / ps);
        RC_ASSERT(at != scratch_page.end());  // every page of the batch is mapped
        rows.push_back(at->second * ps + slot % ps);
      }
      RC_ASSERT(expect.at("scratch_rows").get<std::vector<int64_t>>() == rows);
      ++reads;
    }
  }
  RC_CLASSIFY(begins > 0, "has begins");
  RC_CLASSIFY(writes > 1 && reads > 0, "has writes and reads");
}

// Changes the first integer after a random position inside a record's expect; the replay must stop there.
KVSHARD_PROP(TraceProps, CorruptedExpectIsReportedAtItsLine, ()) {
  TraceGenOptions o = ArbitraryTraceGenOptions();
  o.records = *rc::gen::inRange<int64_t>(1, 80);
  std::vector<std::string> lines = Lines(Generate(o));
  std::vector<size_t> with_number;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t e = lines[i].find("\"expect\":{");
    if (e != std::string::npos && lines[i].find_first_of("0123456789", e) != std::string::npos &&
        lines[i].find("\"expect\":{\"error\"") == std::string::npos) {
      with_number.push_back(i);
    }
  }
  RC_PRE(!with_number.empty());
  const size_t line = *rc::gen::elementOf(with_number);
  std::string& text = lines[line];
  const size_t e = text.find("\"expect\":{");
  const size_t from = *rc::gen::inRange<size_t>(e, text.size());
  size_t digit = text.find_first_of("0123456789", from);
  if (digit == std::string::npos) digit = text.find_first_of("0123456789", e);
  text.insert(digit, "7");  // 12 -> 712, 0 -> 70: another value, still an integer
  std::string corrupted;
  for (const std::string& l : lines) corrupted += l + "\n";
  RC_LOG() << "line " << line + 1 << ": " << text << "\n";
  int64_t records = 0;
  const Status s = ReplayText(corrupted, &records);
  RC_ASSERT(s.code() == StatusCode::kMismatch);
  RC_ASSERT(s.message().rfind("line " + std::to_string(line + 1) + ": ", 0) == 0);
}

// The same for pipeline and radix cache records: their expect subsets (plan fields, owned counts, scratch rows,
// matches, inserts, unlocks, evictions) are checked, so a changed value stops the replay at its line.
KVSHARD_PROP(TraceProps, CorruptedPipelineOrRadixExpectIsReportedAtItsLine, ()) {
  TraceGenOptions o = ArbitraryTraceGenOptions();
  o.records = *rc::gen::inRange<int64_t>(10, 120);
  o.num_layers = *rc::gen::inRange<int64_t>(1, 4);
  o.radix = true;
  std::vector<std::string> lines = Lines(Generate(o));
  std::vector<size_t> candidates;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string op = OpOf(lines[i]);
    const bool new_op = std::count(PipelineOps().begin(), PipelineOps().end(), op) > 0 ||
                        std::count(RadixOps().begin(), RadixOps().end(), op) > 0;
    const size_t e = lines[i].find("\"expect\":{");
    if (new_op && e != std::string::npos && lines[i].find_first_of("0123456789", e) != std::string::npos &&
        lines[i].find("\"expect\":{\"error\"") == std::string::npos) {
      candidates.push_back(i);
    }
  }
  RC_PRE(!candidates.empty());
  const size_t line = *rc::gen::elementOf(candidates);
  std::string& text = lines[line];
  RC_TAG(OpOf(text));
  const size_t e = text.find("\"expect\":{");
  const size_t from = *rc::gen::inRange<size_t>(e, text.size());
  size_t digit = text.find_first_of("0123456789", from);
  if (digit == std::string::npos) digit = text.find_first_of("0123456789", e);
  text.insert(digit, "7");
  std::string corrupted;
  for (const std::string& l : lines) corrupted += l + "\n";
  RC_LOG() << "line " << line + 1 << ": " << text << "\n";
  int64_t records = 0;
  const Status s = ReplayText(corrupted, &records);
  RC_ASSERT(s.code() == StatusCode::kMismatch);
  RC_ASSERT(s.message().rfind("line " + std::to_string(line + 1) + ": " + OpOf(text) + ": ", 0) == 0);
}

// What a replay reported: every mismatch line (--keep-going), how it ended, and the counts.
struct ReplayOutcome {
  std::vector<std::string> mismatches;
  std::string end = "OK";
  int64_t records = 0, fields = 0;
};

// The options of a replay under `backend`: --backend gpu with the reference pool as its device (no GPU needed), each
// device step at its record.
replay::ReplayOptions OptionsFor(replay::Backend backend) {
  replay::ReplayOptions options = PropertyReplayOptions();
  options.backend = backend;
  if (backend != replay::Backend::kRef) {
    options.device_thread = false;
    options.make_device = [](const replay::PoolGeometry& g) { return replay::CreateHostPoolPath(g); };
  }
  return options;
}

// Replays `text` record by record on this thread; with `stateless`, each record is first prepared as the read-ahead
// thread does (running its stateless work or not, as `stateless` says record by record).
ReplayOutcome ReplayByRecord(const std::string& text, const std::vector<bool>* stateless,
                             replay::Backend backend = replay::Backend::kRef) {
  std::istringstream in(text);
  TraceReader reader(&in);
  const Json header = RC_VALUE(reader.ReadHeader(replay::TraceHeaderKeys()));
  std::unique_ptr<replay::Replayer> replayer = RC_VALUE(replay::Replayer::Create(header, OptionsFor(backend)));
  ReplayOutcome out;
  TraceRecord record;
  for (size_t i = 0;; ++i) {
    const StatusOr<bool> more = reader.Next(&record);
    if (!more.ok()) {
      out.end = more.status().ToString();
      break;
    }
    if (!*more) break;
    if (stateless != nullptr) replayer->Prepare(&record, (*stateless)[i % stateless->size()]);
    const Status s = replayer->Replay(record);
    if (s.code() == StatusCode::kMismatch) {
      out.mismatches.push_back(s.message());
    } else if (!s.ok()) {
      out.end = s.ToString();
      break;
    }
  }
  out.records = replayer->summary().records;
  out.fields = replayer->summary().fields;
  return out;
}

// Work moved to the read-ahead threads changes nothing: a trace with corrupted expects or inputs (a begin's pages, a
// write's locs), an expected error where there is none and an unknown op replays to the same mismatches, end and
// counts whether each record's shape check, stateless answer and typed inputs (integer lists, a begin's requests) were
// made ahead (ReplayStream's reader threads, one to four, or this thread in either way) or in Replay, under
// --backend ref and gpu. One record is prepared record after record (a reader reuses a record's typed lists).
void CheckPreparingAheadChangesNoOutcome(const std::string& generated) {
  std::vector<std::string> lines = Lines(generated);
  const int corruptions = *rc::gen::inRange(0, 6);
  for (int c = 0; c < corruptions && lines.size() > 1; ++c) {
    std::string& text = lines[*rc::gen::inRange<size_t>(1, lines.size())];
    const size_t e = text.find("\"expect\":{");
    switch (*rc::gen::inRange(0, 5)) {
      case 0: {  // another value somewhere in expect
        const size_t digit = e == std::string::npos ? e : text.find_first_of("0123456789", e);
        if (digit != std::string::npos) text.insert(digit, "7");
        break;
      }
      case 1:  // an error expected from a record that succeeds (or the wrong one)
        if (e != std::string::npos) text = text.substr(0, e) + "\"expect\":{\"error\":\"no such error\"}}";
        break;
      case 2:  // a malformed field: the record's own error ends the replay
        text.insert(text.find('{') + 1, "\"no_such_field\":1,");
        break;
      case 3: {  // another input: a digit before the expect (a begin's pages or lengths, a write's or read's locs)
        const size_t end = e == std::string::npos ? text.size() : e;
        const size_t digit = text.find_first_of("0123456789", *rc::gen::inRange<size_t>(0, end));
        if (digit < end) text.insert(digit, "1");
        break;
      }
      default:  // an op no table row has
        text.insert(text.find("\"op\":\"") + 6, "x");
        break;
    }
  }
  std::string trace;
  for (const std::string& l : lines) trace += l + "\n";
  const std::vector<bool> stateless = *rc::gen::nonEmpty<std::vector<bool>>();
  const ReplayOutcome plain = ReplayByRecord(trace, nullptr);
  RC_TAG(plain.mismatches.empty() ? "clean" : "mismatches", plain.end == "OK" ? "ends" : "stops on an error");
  const std::vector<bool> always = {true}, never = {false};
  for (const ReplayOutcome& got :
       {ReplayByRecord(trace, &stateless), ReplayByRecord(trace, &always), ReplayByRecord(trace, &never)}) {
    RC_ASSERT(got.mismatches == plain.mismatches);
    RC_ASSERT(got.end == plain.end);
    RC_ASSERT(got.records == plain.records);
    RC_ASSERT(got.fields == plain.fields);
  }
  const ReplayOutcome gpu = ReplayByRecord(trace, nullptr, replay::Backend::kGpu);
  for (const ReplayOutcome& got : {ReplayByRecord(trace, &stateless, replay::Backend::kGpu),
                                   ReplayByRecord(trace, &always, replay::Backend::kGpu)}) {
    RC_ASSERT(got.mismatches == gpu.mismatches);
    RC_ASSERT(got.end == gpu.end);
    RC_ASSERT(got.records == gpu.records);
    RC_ASSERT(got.fields == gpu.fields);
  }
  std::istringstream in(trace);  // the reader threads' way, one or several
  replay::ReplayOptions options = PropertyReplayOptions();
  options.read_threads = *rc::gen::inRange(1, 5);
  RC_TAG(options.read_threads == 1 ? "one reader thread" : "several reader threads");
  replay::ReplayReport report;
  std::vector<std::string> streamed;
  const Status s = replay::ReplayStream(in, options, &report,
                                        [&](const replay::ReplayMismatch& m) { streamed.push_back(MismatchText(m)); });
  RC_ASSERT(streamed == plain.mismatches);
  RC_ASSERT(s.ToString() == plain.end);
  RC_ASSERT(report.summary.records == plain.records);
  RC_ASSERT(report.summary.fields == plain.fields);
}

KVSHARD_PROP(TraceProps, PreparingAheadChangesNoOutcome, ()) {
  TraceGenOptions o = ArbitraryTraceGenOptions();
  o.records = *rc::gen::inRange<int64_t>(1, 150);
  CheckPreparingAheadChangesNoOutcome(Generate(o));
}

// The same with lists longer than a record keeps for its reader (PreparedRecord::kKeptInts: they move to the
// checking thread): tokens of up to 24,000 and, with a page of one token, a begin's requests of as many pages, with
// enough records for a long list's insert and then its match. A two-hundredth of the cases (10; 5 in a sanitizer
// run): each is heavy.
TEST(TraceProps, PreparingAheadChangesNoOutcomeWithLongLists) {
  RecordPropertyCases(CheckProperty(
      CurrentTestId(),
      [] {
        TraceGenOptions o = ArbitraryTraceGenOptions();
        o.max_len = 24000;
        o.page_size = *rc::gen::element<int64_t>(1, 16);
        o.pages_per_rank = o.page_size == 1 ? 24000 : 2048;
        o.records = *rc::gen::inRange<int64_t>(20, 33);
        o.batch_size = *rc::gen::inRange<int64_t>(1, 3);
        o.num_layers = *rc::gen::inRange<int64_t>(0, 2);
        o.row_words = 1;
        o.radix = true;  // inserts and matches of long token lists, matches that find them
        o.share_percent = *rc::gen::inRange<int64_t>(60, 101);
        CheckPreparingAheadChangesNoOutcome(Generate(o));
      },
      FractionOfCases(200, 5)));
}

// The most pages a begin_shard_extend of `text` lists over its requests.
size_t MostPagesInABegin(const std::string& text) {
  size_t most = 0;
  for (const std::string& line : Lines(text)) {
    if (OpOf(line) != "begin_shard_extend") continue;
    const Json rec = Json::parse(line);
    size_t pages = 0;
    for (const Json& r : rec.at("requests")) pages += r.at("pages").size();
    most = std::max(most, pages);
  }
  return most;
}

// And a begin whose requests list more pages than a record keeps (they move to the checking thread as a long list
// does), in every case: a case draws its options, then takes the first of 32 seeds from the drawn one whose trace has
// such a begin (pages of one token, requests of up to 24,000). A two-hundredth of the cases (5): each is heavy.
TEST(TraceProps, PreparingAheadChangesNoOutcomeWithALongBegin) {
  RecordPropertyCases(CheckProperty(
      CurrentTestId(),
      [] {
        TraceGenOptions o = ArbitraryTraceGenOptions();
        o.max_len = 24000;
        o.page_size = 1;
        o.pages_per_rank = 24000;
        o.records = *rc::gen::inRange<int64_t>(8, 17);
        o.batch_size = *rc::gen::inRange<int64_t>(1, 3);
        o.num_layers = 1;
        o.row_words = 1;
        o.edge_heavy = false;
        std::string text;
        size_t most = 0;
        for (int tries = 0; tries < 32; ++tries) {
          text = Generate(o);
          most = MostPagesInABegin(text);
          if (most > replay::PreparedRecord::kKeptInts) break;
          ++o.seed;
        }
        RC_LOG() << "seed " << o.seed << ": a begin of " << most << " pages\n";
        RC_ASSERT(most > replay::PreparedRecord::kKeptInts);
        CheckPreparingAheadChangesNoOutcome(text);
      },
      FractionOfCases(200, 5)));
}

KVSHARD_PROP(TraceProps, ReadThenWriteIsIdentity, ()) {
  const std::string text = Generate(ArbitraryTraceGenOptions());
  std::istringstream in(text);
  TraceReader reader(&in);
  std::string rewritten = RC_VALUE(reader.ReadHeader(replay::TraceHeaderKeys())).dump() + "\n";
  TraceRecord record;
  while (RC_VALUE(reader.Next(&record))) rewritten += record.json.dump() + "\n";
  RC_ASSERT(rewritten == text);
}

}  // namespace
}  // namespace kvshard::props
