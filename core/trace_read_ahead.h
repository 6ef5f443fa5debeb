// TraceReadAhead: a trace's records read, parsed and prepared on threads of their own, ahead of the one thread that
// checks them in order (kvshard replay), with memory bounded by bytes and records queued.
#ifndef KVSHARD_CORE_TRACE_READ_AHEAD_H_
#define KVSHARD_CORE_TRACE_READ_AHEAD_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/status.h"
#include "core/trace.h"

namespace kvshard {

// Reads a trace's records on a thread of its own, ahead of the caller (a 2-core machine parses the next records while
// the caller checks this one). Memory stays flat: the reader reads a line only while the lines queued and the one the
// caller holds take at most kReadAheadBytes (so a large record is read only once the caller is done with the one
// before it) and at most kReadAheadRecords wait. Where no thread can be made, the records are read in the caller.
class TraceReadAhead {
 public:
  static constexpr int64_t kReadAheadBytes = int64_t{4} << 20;
  static constexpr size_t kReadAheadRecords = 64;

  // Runs on the reader thread (or in Next without one) for every record read whole, before the caller gets it: work
  // that depends on the record alone (its shape, a stateless answer) moves off the caller's thread. `ahead` is true
  // when the reader is ahead of the caller (half its bound of records queued, or no thread): optional work is best
  // done then, and left to the caller otherwise, so the two threads share it. It may set or reuse record->prepared;
  // an exception it throws is rethrown by Next in order.
  using Prepare = std::function<void(TraceRecord* record, bool ahead)>;

  // `reader` (its header read) must outlive this object.
  explicit TraceReadAhead(TraceReader* reader, Prepare prepare = nullptr);
  // Stops the reader thread and joins it (a line it is reading is read to its end first: on a pipe, until the writer
  // writes it or closes).
  ~TraceReadAhead();
  TraceReadAhead(const TraceReadAhead&) = delete;
  TraceReadAhead& operator=(const TraceReadAhead&) = delete;

  // As TraceReader::Next, in the same order with the same errors (an exception the reader met is rethrown here).
  // The record *record held before is handed back to the reader thread, which reuses its memory.
  StatusOr<bool> Next(TraceRecord* record);
  // As TraceReader::truncated_line, once Next returned the error.
  int64_t truncated_line() const { return reader_->truncated_line(); }

 private:
  struct Item {
    TraceRecord record;
    StatusOr<bool> more = false;
    int64_t bytes = 0;
    std::exception_ptr exception;
  };
  void ReadAll();

  // How the caller waits for the reader: not, for a batch of kWakeBatch records (at most kBatchWait), or for any.
  enum CallerWait { kNotWaiting, kWaitingForBatch, kWaitingForAny };
  static constexpr size_t kWakeBatch = 8;
  static constexpr std::chrono::microseconds kBatchWait{500};

  TraceReader* reader_;
  Prepare prepare_;
  std::mutex mu_;
  std::condition_variable reader_wake_, caller_wake_;
  std::deque<Item> queue_;                // read, not yet taken; the last one ends the trace (false, or an error)
  std::vector<TraceRecord> spare_;        // records handed back, to read into again
  std::deque<Item> taken_;                // the caller's: taken from the queue together, not yet given out
  std::vector<TraceRecord> handed_back_;  // the caller's: records it is done with, for spare_ at its next lock
  int64_t queued_bytes_ = 0, held_bytes_ = 0;
  bool stop_ = false;
  bool reader_waiting_ = false;  // who to wake (a wake-up per record costs a system call)
  CallerWait caller_waiting_ = kNotWaiting;
  bool ended_ = false;  // the reader queued its last item (Next after it: false)
  std::thread thread_;  // not joinable when no thread could be made
};

}  // namespace kvshard

#endif  // KVSHARD_CORE_TRACE_READ_AHEAD_H_
