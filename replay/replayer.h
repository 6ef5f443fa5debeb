// Replays a trace (docs/trace-format.md) through the reference model: runs every record, checks its expect
// against what the matching command prints with --json, and checks the allocator's invariants after each.
#ifndef KVSHARD_REPLAY_REPLAYER_H_
#define KVSHARD_REPLAY_REPLAYER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/json.h"
#include "core/status.h"
#include "core/line_reader.h"
#include "core/memory_budget.h"
#include "core/trace.h"
#include "cpu_ref/allocator.h"
#include "cpu_ref/radix_cache.h"
#include "cpu_ref/radix_requests.h"
#include "replay/backend.h"
#include "replay/field_answer.h"
#include "replay/mismatch.h"
#include "replay/pool_replay.h"

namespace kvshard::replay {

struct ReplayOp;  // a row of the op table (replay/op_table.h)

// What Replayer::Prepare worked out for a record on the read-ahead thread (kept with the record, reused with it).
struct PreparedRecord : TracePrepared {
  const ReplayOp* op = nullptr;  // the record's op row (null: unknown op, `shape` says so)
  Status shape;                  // the record's field shapes and size (CheckRecord), or the unknown op
  bool judged = false;           // a stateless record ran and was judged: `verdict` is its outcome
  Status verdict;                // a malformed expect.error, or (judged) the outcome Replay returns
  ReplayMismatch mismatch;       // the mismatch when verdict is one
  int64_t fields = 0;            // scalars the judged record compared
  // A stateful record's expect typed (made while the readers were ahead; else has_typed_expect is false): the
  // checking thread compares its typed answer against it without walking the expect's JSON. Points into the
  // record's JSON; kept with the record for the next one it is reused for.
  TypedExpect typed_expect;
  bool has_typed_expect = false;
  // A stateful record's inputs typed while the readers were ahead, for an op row with takes_typed (its kIntList
  // fields by JsonInts, a begin_shard_extend's requests by ExtendRequestsFromJson): the checking thread takes them
  // (Replayer::TakeInts, TakeRequests) instead of converting the record's JSON itself. Each is taken once.
  struct TypedInts {
    const char* key = nullptr;  // null once taken
    std::vector<int64_t> ints;
  };
  // The integers a record's typed lists (and requests' pages) may hold and still stay with it when taken; longer
  // ones move to the checking thread, so a record does not keep a large list's memory for the next one.
  static constexpr size_t kKeptInts = size_t{1} << 14;
  std::vector<TypedInts> typed_ints;  // [0, typed_int_count) are this record's
  size_t typed_int_count = 0;
  bool has_requests = false;
  StatusOr<std::vector<ExtendRequest>> requests = std::vector<ExtendRequest>();
};

// What a replay checked so far.
struct ReplaySummary {
  int64_t records = 0;
  int64_t fields = 0;  // scalars compared against expect
  int64_t mismatches = 0;
  std::string first_mismatch;  // "line N: <op>: <field>: expected X, got Y[ meta=...]" (MismatchText)
};

// The header keys a trace may carry.
const std::vector<std::string>& TraceHeaderKeys();

// Where a replay runs the pool pipeline's data moves: the backend and, for gpu/diff, how to make the device
// data path for the header's pool geometry (replay/gpu_pool_path.h).
struct ReplayOptions {
  Backend backend = Backend::kRef;
  Impl impl = Impl::kRef;  // who builds gather_plan, split and rerange plans
  std::function<StatusOr<std::unique_ptr<PoolDataPath>>(const PoolGeometry&)> make_device;
  // --max-memory: the header's allocator and pools, and every record's answer (ReplayOp::size), must fit.
  MemoryBudget budget;
  LineCheck line_check;  // bounds each line as ReplayStream reads it (budget.Lines(); may be empty)
  // Also walk the whole radix cache after every allocator record (--full-invariants; the properties run it): by
  // default only what the record changed is checked.
  bool full_invariants = false;
  // --backend gpu|diff: the device's steps on a thread of their own while the host checks the reference or the
  // baseline (their differences reported by ReplayStream, in trace order and with the same counts, as if found at
  // their record); false: each at its record. A caller driving Replayer::Replay itself takes them with SettleDevice.
  bool device_thread = true;
  // --read-threads: the threads that read, parse and prepare records ahead of the checking thread (TraceReadAhead);
  // 0 picks by the host's cores (DefaultReadThreads).
  int read_threads = 0;
  // Where set, ReplayStream stops before its next record once *cancel is true, and returns kCancelledReplay (a caller
  // that no longer wants the outcome: the later traces of `replay --jobs` after the one that ended the command).
  const std::atomic<bool>* cancel = nullptr;
};

// ReplayStream's error message when ReplayOptions::cancel stopped it (FailedPrecondition).
inline constexpr char kCancelledReplay[] = "replay: cancelled";

// The reader threads ReplayStream runs when ReplayOptions::read_threads is 0: one on a host of fewer than four cores
// (the checking thread needs the other), two on four to seven, four on eight or more (on the H100 host's 16 cores,
// with the readers taking every stateless record they are ahead for, `gpu` took 1.03 s with four against 1.54 s with
// two, and `ref` and `diff` no longer with four than with two: docs/PERFORMANCE.md, fourteenth round).
int DefaultReadThreads();

// What a trace header's allocator (N * (pages_per_rank + 1) logical pages) and pools (the sharded pool and
// scratch, the unsharded baseline; `pool` null when the trace has none) hold: an upper estimate.
std::vector<MemoryTerm> ReplayMemoryTerms(int64_t shard_size, int64_t page_size, int64_t pages_per_rank,
                                          const PoolGeometry* pool);

// The reference state of one trace: the header's allocator, the pages each alloc request holds, the radix
// prefix cache over that allocator, and the sharded pool pipeline.
class Replayer {
 public:
  // Builds the state the header describes; errors name the header field ("line 1: allocator.page_size: ...").
  static StatusOr<std::unique_ptr<Replayer>> Create(const Json& header, ReplayOptions options = {});

  // The --json result of one record (for allocator records, its `alloc --json` results entry); with `only` (an
  // object), results may leave out top-level keys it does not name. A malformed record is InvalidArgument
  // "<field>: <what>"; a record the model rejects returns its error (state unchanged).
  StatusOr<Json> Execute(const TraceRecord& record, const Json* only = nullptr);

  // Runs one record and checks its expect and the invariants (replay/replay_stream.cc): OK, a Mismatch "line N:
  // <op>: <field>: expected X, got Y" (MismatchText of last_mismatch(), which holds it as a value), or
  // InvalidArgument "line N: <field>: <what>" for a malformed record (or one rejected without an expect saying so).
  // The record's "meta" changes no answer: it only rides along with a mismatch.
  Status Replay(const TraceRecord& record);
  // Works out on another thread what `record` alone decides (thread-safe beside Replay and beside other Prepare
  // calls, as the reader threads make them: reads only what Create set): its op row and shape check and, with
  // run_stateless, a stateless record's whole outcome, kept in record->prepared for Replay, which then gives the same
  // result as without it.
  void Prepare(TraceRecord* record, bool run_stateless = true) const;

  // A device difference of --backend diff found on the device thread: the mismatch of its record, and what a
  // replay that stopped there, or went on, counts for it.
  struct DeviceMismatch {
    ReplayMismatch mismatch;
    int64_t records = 0;        // summary().records at its record
    int64_t fields_before = 0;  // summary().fields before its record (a failed record's fields are not counted)
    int64_t record_fields = 0;  // fields its record counted meanwhile
    int64_t rows_at_stop = 0;   // rows_compared() of a replay stopped at its record
    int64_t record_rows = 0;    // rows the host counted at its record meanwhile
  };
  // Cheap: the device thread has found a difference since the last SettleDevice.
  bool device_found() const { return pool_ && pool_->device_found(); }
  // Waits for the device thread and returns its differences since the last call, in trace order.
  std::vector<DeviceMismatch> SettleDevice();
  // The device path's Start error on the device thread, once SettleDevice has seen it (OK otherwise).
  Status device_error() const { return pool_ ? pool_->device_error() : Status::Ok(); }
  // The device thread (null without one), for its timings.
  const DeviceWorker* device_worker() const { return pool_ ? pool_->device_worker() : nullptr; }
  // The plan thread's (null without a device thread).
  const DeviceWorker* plan_worker() const { return pool_ ? pool_->plan_worker() : nullptr; }
  // The device path's set-up seconds (and their driver and context parts) and the times its pending checks were
  // taken (PoolReplay's; 0 without a device).
  double device_setup_seconds() const { return pool_ ? pool_->device_setup_seconds() : 0; }
  PoolDataPath::StartTimes device_start_times() const {
    return pool_ ? pool_->device_start_times() : PoolDataPath::StartTimes{};
  }
  int64_t device_checks_taken() const { return pool_ ? pool_->checks_taken() : 0; }

  // The mismatch the last Replay returned.
  const ReplayMismatch& last_mismatch() const { return last_mismatch_; }

  // Counts so far.
  ReplaySummary& summary() { return summary_; }
  // KV rows the pipeline records compared (0 without pool records).
  int64_t rows_compared() const { return pool_ ? pool_->rows_compared() : 0; }
  // Stateless records (plans, CP helpers) replayed so far, and how many of them a reader thread had already run and
  // judged (Prepare, while ahead): the rest ran on the checking thread.
  int64_t stateless_records() const { return stateless_records_; }
  int64_t stateless_judged_ahead() const { return stateless_judged_ahead_; }

 private:
  Replayer() = default;
  // The op table (one row per trace op) and a row by name (InvalidArgument "op: unknown op ..." naming them all).
  static const std::vector<ReplayOp>& Ops();
  static StatusOr<const ReplayOp*> FindOp(const std::string& name);
  // Replay without the device thread's bookkeeping.
  Status ReplayRecord(const TraceRecord& record);
  // Execute with the record's row already found (and, with shape_checked, its CheckRecord passed).
  StatusOr<Json> ExecuteOp(const ReplayOp& op, const TraceRecord& record, const Json* only, bool shape_checked = false);
  // What ExecuteOp checks before its executor runs (shape, the state the op needs); counts the record's kind.
  Status BeginOp(const ReplayOp& op, const TraceRecord& record, bool shape_checked);
  // A reader's share of Prepare for an op with takes_typed: the record's inputs typed into *p.
  static void PrepareInputs(const Json& rec, const ReplayOp& op, PreparedRecord* p);
  // The current record's typed list of `key` (PreparedRecord::typed_ints), marked taken; null when a reader did not
  // type it (or it was taken).
  PreparedRecord::TypedInts* TakeTyped(const char* key);
  // The current record's integer list rec[key] (a kIntList field it has), as JsonInts reads it: the one typed ahead
  // when a reader did (left with the record: its reader reuses the memory, which this thread then never frees), else
  // converted here into *holder. Valid while the record is replayed.
  const std::vector<int64_t>& TakeInts(const Json& rec, const char* key, std::vector<int64_t>* holder);
  // The current record's rec["locs"] as JsonInts reads it (the typed list moved out), shared with the device thread;
  // null when it has none.
  PoolReplay::SharedLocs TakeLocs(const Json& rec);
  // The current begin_shard_extend record's requests, as ExtendRequestsFromJson reads them: the ones typed ahead
  // (left with the record, as TakeInts leaves its lists), else read into *holder.
  StatusOr<const std::vector<ExtendRequest>*> TakeRequests(const Json& rec, std::vector<ExtendRequest>* holder);
  // The model's invariants after a record of `op` ran: a Mismatch "invariant: ..." when one breaks.
  Status CheckInvariantsAfter(const ReplayOp& op);
  // A record's outcome against its expect, touching no state: OK, a Mismatch (*mismatch holds it), or the record's
  // error. `shape` is its CheckRecord result when known (else checked here when needed).
  Status Judge(const TraceRecord& record, const StatusOr<const ReplayOp*>& op, const Status* shape, StatusOr<Json>* got,
               int64_t* fields, ReplayMismatch* mismatch) const;
  // Keeps `mismatch` as last_mismatch_ and returns it as a Mismatch status (its text line).
  Status Fail(ReplayMismatch mismatch);
  StatusOr<FieldAnswer> RunBeginShardExtend(const Json& rec, const Json* only);
  StatusOr<FieldAnswer> RunAlloc(const Json& rec);
  StatusOr<FieldAnswer> RunFree(const Json& rec, bool group);
  // The locs a free spec names: a list of locs, or an object whose "request" is an alloc request's number.
  StatusOr<std::vector<int64_t>> FreeLocs(const Json& spec) const;
  Status CheckAllocatorInvariants() const;
  FieldAnswer AllocatorState(const char* op) const;
  void Release(const std::vector<int64_t>& locs);
  // Radix cache records (replay/radix_records.cc).
  StatusOr<FieldAnswer> RunMatch(const Json& rec);
  StatusOr<FieldAnswer> RunInsert(const Json& rec);
  StatusOr<FieldAnswer> RunEvict(const Json& rec);
  StatusOr<FieldAnswer> RunDecLockRef(const Json& rec);
  // The radix cache's invariants for what the last record changed (and the whole walk under full_invariants).
  Status CheckCacheInvariants();
  Status CheckWholeCache() const;
  Status UsePageCache();  // marks the page model used; an error once radix_* records ran
  // SGLang's RadixCache calls on the literal tree, nodes named by handles (replay/tree_records.cc).
  StatusOr<Json> RunTreeMatch(const Json& rec);
  StatusOr<Json> RunTreeInsert(const Json& rec);
  StatusOr<Json> RunTreeLock(const Json& rec, bool inc);
  StatusOr<Json> RunTreeEvict(const Json& rec);
  StatusOr<Json> RunTreeCacheReq(const Json& rec, bool finished);
  StatusOr<ref::RadixTree*> Tree();
  int64_t HandleOf(int64_t node);
  StatusOr<int64_t> NodeOf(const Json& rec, const char* field) const;
  Status CheckSlots(const std::vector<int64_t>& locs, const char* field) const;
  Json TreeAnswer(Json answer) const;
  Status CheckTreeInvariants() const;
  // SGLang's request path (replay/request_records.cc).
  StatusOr<Json> RunAdmitReq(const Json& rec, const Json* only);
  StatusOr<Json> RunAllocReqs(const Json& rec, const Json* only);
  StatusOr<Json> RunCacheReq(const Json& rec, bool finished, const Json* only);
  StatusOr<Json> RunAbortReq(const Json& rec, const Json* only);
  StatusOr<Json> RunEvictTokens(const Json& rec, const Json* only);
  // Adds the tree's sizes and (unless `only` leaves them out) the allocator's class lists to a request answer.
  Json WithRequestState(Json answer, const Json* only) const;
  Status CheckRequestInvariants() const;

  std::optional<ref::PageInterleaveAllocator> allocator_;
  std::unique_ptr<ref::RadixCache> cache_;      // over *allocator_ (whose address is stable: Replayer never moves)
  std::unordered_map<int64_t, int64_t> locks_;  // locked match K -> the node it locked
  int64_t matches_ = 0;                         // locking matches so far (the next one's K)
  std::unique_ptr<ref::RadixTree> tree_;        // over *allocator_, made by the first radix_* record
  std::vector<int64_t> handle_node_;            // node handle -> tree node (handles number nodes as first named)
  std::unordered_map<int64_t, int64_t> node_handle_;
  bool page_cache_used_ = false;                      // a page-model radix record ran (they do not mix with radix_*)
  std::unique_ptr<ref::RadixRequests> request_path_;  // over *allocator_, made by the first request record
  int64_t requests_records_ = 0, allocator_records_ = 0;
  int64_t stateless_records_ = 0, stateless_judged_ahead_ = 0;
  std::unique_ptr<PoolReplay> pool_;   // with the header's "pool"
  PreparedRecord* current_ = nullptr;  // what a reader worked out for the record ReplayRecord runs now, if anything
  Impl impl_ = Impl::kRef;
  MemoryBudget budget_;  // --max-memory, for every record's answer
  bool full_invariants_ = false;
  // Pages an alloc request was handed, and how many of them it still holds.
  struct Held {
    std::vector<int64_t> pages;
    int64_t live = 0;
  };
  static constexpr int64_t kCached = -2;
  std::vector<int64_t> holder_;             // per logical page: the alloc request holding it, kCached, or -1
  std::unordered_map<int64_t, Held> held_;  // requests that still hold pages (memory flat in trace length)
  int64_t requests_ = 0;                    // alloc requests made so far (the next request's id)
  int64_t held_pages_ = 0;
  std::vector<int64_t> freed_cached_;  // pages freed while the radix cache holds them (since the last check)
  ReplaySummary summary_;
  ReplayMismatch last_mismatch_;
  // Records whose device step may still find a difference (dropped once their step finished without one).
  struct DeviceStepRecord {
    int64_t step = 0;
    ReplayMismatch at;  // the record's line, op and meta
    int64_t records = 0, fields_before = 0, fields_after = 0;
  };
  std::deque<DeviceStepRecord> device_steps_;
};

// What ReplayStream saw.
struct ReplayReport {
  ReplaySummary summary;
  int64_t rows_compared = 0;            // KV rows the pipeline records compared
  std::optional<ReplayMismatch> first;  // the first mismatch, when there was one
  int64_t truncated_line = 0;           // the line of a truncated last record (0: the trace ended whole)
  // --backend gpu|diff's device thread: whether there was one, the seconds it ran device steps and the seconds the
  // checking thread waited for it (queue full, or settling at a mismatch and at the end); the plan thread's busy
  // seconds and the device thread's wait for its answers.
  // Of its busy seconds, the path's set-up (Start); and how many times it took the pending checks from the path (one
  // wait for the device each).
  bool device_thread = false;
  double device_busy_seconds = 0, device_waited_seconds = 0;
  double device_setup_seconds = 0;
  double device_driver_seconds = 0, device_context_seconds = 0;  // of the set-up: the driver's start, the context's
  int64_t device_checks_taken = 0;
  double plan_busy_seconds = 0, plan_waited_seconds = 0;
  // The checking thread's CPU seconds over the records, the wall seconds it waited for the reader threads' next
  // record, and the reader threads (--read-threads; 0: it read them itself) with their CPU seconds; and of the
  // stateless records, how many the reader threads judged (the rest ran on the checking thread).
  double checking_cpu_seconds = 0, reader_wait_seconds = 0, reader_cpu_seconds = 0;
  int read_threads = 0;
  int64_t stateless_records = 0, stateless_judged_ahead = 0;
  // Wall seconds from the header's read to the last record's outcome (the device settled), and then to the
  // replayer's release (its pools, and the device path's buffers, streams and threads).
  double replay_seconds = 0, release_seconds = 0;
};

// Replays a whole trace from `in` (what `kvshard replay`, the trace properties and the trace fuzzer run): reads
// the header, builds the replayer and runs every record, filling *report as it goes. A malformed line stops it
// with that error. A mismatch stops it too (the Mismatch is returned) unless `on_mismatch` is given: then each
// one is counted, passed to it, and the replay goes on (--keep-going); OK at the end either way. A last line cut
// before its newline that is not valid JSON (a recorder killed mid-write) ends the replay after every complete
// record ran: InvalidArgument "line N: truncated last record (no newline, not valid JSON); K records before it
// checked, M mismatches", with report->truncated_line = N.
Status ReplayStream(std::istream& in, const ReplayOptions& options, ReplayReport* report,
                    const std::function<void(const ReplayMismatch&)>& on_mismatch = nullptr);

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_REPLAYER_H_
