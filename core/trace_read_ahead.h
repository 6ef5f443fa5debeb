// TraceReadAhead: a trace's records read, parsed and prepared on threads of their own, ahead of the one thread that
// checks them in order (kvshard replay), with memory bounded by bytes and records queued.
#ifndef KVSHARD_CORE_TRACE_READ_AHEAD_H_
#define KVSHARD_CORE_TRACE_READ_AHEAD_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/trace.h"

namespace kvshard {

// Reads a trace's records on threads of their own, ahead of the caller (a 2-core machine parses the next records while
// the caller checks this one; a larger host parses several at once). Each reader thread in turn reads the next line
// (lines are read one at a time, in order), then parses and prepares it beside the others; the caller gets the
// records in line order. Memory stays flat: a line is read only while the lines queued and those the caller holds
// take at most kReadAheadBytes (so a large record is read only once the caller is done with the one before it) and at
// most kReadAheadRecords wait. Where no thread can be made, the records are read in the caller.
// The calling thread's CPU seconds so far (0 where its clock is not available).
double CallingThreadCpuSeconds();

class TraceReadAhead {
 public:
  static constexpr int64_t kReadAheadBytes = int64_t{4} << 20;
  static constexpr size_t kReadAheadRecords = 128;
  // Records between the caller and a record being read that make the readers "ahead" of it (Prepare). A record's
  // optional work (a stateless record's answer, tens of microseconds) then ends before a fast caller (--backend gpu:
  // a few microseconds a record) reaches it; a bound of half the queue left most of it to such a caller.
  static constexpr size_t kAheadRecords = 16;
  // The most reader threads one read-ahead runs.
  static constexpr int kMaxThreads = 16;

  // Runs on a reader thread (or in Next without one) for every record read whole, before the caller gets it: work
  // that depends on the record alone (its shape, a stateless answer) moves off the caller's thread. It runs on several
  // records at once when there are several reader threads. `ahead` is true when the readers are ahead of the caller
  // (kAheadRecords queued or taken by the caller and not reached yet, or no thread): optional work is best
  // done then, and left to the caller otherwise, so the threads share it. It may set or reuse record->prepared; an
  // exception it throws is rethrown by Next in order.
  using Prepare = std::function<void(TraceRecord* record, bool ahead)>;

  // `reader` (its header read) must outlive this object; `threads` reader threads (1 to kMaxThreads).
  explicit TraceReadAhead(TraceReader* reader, Prepare prepare = nullptr, int threads = 1);
  // Stops the reader threads and joins them (a line being read is read to its end first: on a pipe, until the writer
  // writes it or closes).
  ~TraceReadAhead();
  TraceReadAhead(const TraceReadAhead&) = delete;
  TraceReadAhead& operator=(const TraceReadAhead&) = delete;

  // As TraceReader::Next, in the same order with the same errors (an exception a reader met is rethrown here).
  // The record *record held before is handed back to the thread that read it, which reuses its memory.
  StatusOr<bool> Next(TraceRecord* record);
  // The records Next took with the record it gave last and has not given yet: Next gives them without waiting.
  size_t held_records() const { return taken_.size(); }
  // As TraceReader::truncated_line, once Next returned the error.
  int64_t truncated_line() const { return truncated_line_; }
  // The reader threads that run (0 when none could be made: Next reads in the caller).
  int threads() const { return static_cast<int>(threads_.size()); }
  // The wall seconds Next has waited for the reader threads so far (none without threads: Next reads itself).
  double CallerWaitSeconds() const;
  // The CPU seconds the reader threads have run so far (0 without threads, or where the clock is not available).
  double ReaderCpuSeconds() const;

  // The op a record line names first, as kvshard writes them ({"op":"alloc",...}), or "" for any other layout (the
  // readers parse a line into a record of the same op handed back, whose containers it reuses).
  static std::string_view LeadingOp(std::string_view text);

 private:
  // A line's place in the queue: claimed by a reader thread in line order, ready once parsed and prepared.
  struct Item {
    TraceRecord record;
    StatusOr<bool> more = false;
    int64_t bytes = 0;
    int64_t truncated_line = 0;
    std::exception_ptr exception;
    int reader = 0;      // the thread that read it, which gets its record back
    bool ready = false;  // parsed and prepared
    bool last = false;   // ends the trace: false, an error or an exception
  };
  void ReadAll(int reader);
  // Records queue_[index] as ready and returns whether the caller is to be woken; under mu_.
  bool Publish(size_t index, Item item);
  // Moves into *record the spare of `reader` to parse a line of `op` into: the last one of that op handed back
  // (its value has the line's shape: its containers are reused), else the last one (called under mu_).
  void TakeSpare(int reader, std::string_view op, TraceRecord* record);

  // A queue of at most kReadAheadRecords items in slots made once. A std::deque's nodes were made by the readers and
  // freed by the caller: glibc frees a chunk into its maker's arena, under that arena's lock once the freeing
  // thread's own cache of the size is full (docs/PERFORMANCE.md, "CPU: trace replay", twenty-fifth round).
  class ItemRing {
   public:
    ItemRing() : slots_(kReadAheadRecords) {}
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    Item& operator[](size_t i) { return slots_[(head_ + i) % kReadAheadRecords]; }
    Item& front() { return slots_[head_]; }
    // The item after the last, reset; the ring must not be full (KVSHARD_CHECK).
    Item& emplace_back();
    // Drops the first item (its slot keeps what was left in it until reused).
    void pop_front();

   private:
    std::vector<Item> slots_;
    size_t head_ = 0, size_ = 0;
  };

  // How the caller waits for the readers: not, for a batch of kWakeBatch records (at most kBatchWait), or for any.
  enum CallerWait { kNotWaiting, kWaitingForBatch, kWaitingForAny };
  static constexpr size_t kWakeBatch = 8;
  static constexpr std::chrono::microseconds kBatchWait{500};

  TraceReader* reader_;
  Prepare prepare_;
  std::mutex read_mu_;       // held by the thread reading a line (and waiting for room to read it)
  bool read_ended_ = false;  // under read_mu_: the end of the input or a read error was met
  std::mutex mu_;
  std::condition_variable reader_wake_, caller_wake_;
  ItemRing queue_;           // claimed in line order, ready or not, not yet taken; the caller takes a ready prefix
  int64_t first_index_ = 0;  // the line order number of queue_.front() (each claim takes the next one)
  size_t ready_ = 0;         // the leading items of queue_ that are ready, up to the first last one
  std::vector<std::vector<TraceRecord>> spare_;  // per reader thread: records handed back, to read into again
  ItemRing taken_;                               // the caller's: taken from the queue together, not yet given out
  // taken_'s size as the readers see it: records the caller took but has not reached are ahead of it too (the caller
  // takes every ready record at once, so the queue alone rarely looks ahead of a fast caller).
  std::atomic<size_t> taken_left_{0};
  std::vector<std::pair<int, TraceRecord>> handed_back_;  // the caller's: records it is done with, and their reader
  int held_reader_ = -1;                                  // the caller's: the reader of the record it holds
  int64_t queued_bytes_ = 0, held_bytes_ = 0;
  bool stop_ = false;
  bool failed_ = false;      // a record failed (error or exception): read no more lines
  int readers_waiting_ = 0;  // for room (a wake-up per record costs a system call)
  CallerWait caller_waiting_ = kNotWaiting;
  bool ended_ = false;  // the ready prefix reached the last item (Next after it: false)
  int64_t truncated_line_ = 0;
  std::vector<std::thread> threads_;
  std::chrono::steady_clock::duration caller_waited_{};  // Next's waits for a ready record (the caller's thread)
  // Each reader thread's CPU seconds, set as it ends (its clock goes with it); under cpu_mu_.
  mutable std::mutex cpu_mu_;
  std::vector<std::optional<double>> ended_cpu_;
};

}  // namespace kvshard

#endif  // KVSHARD_CORE_TRACE_READ_AHEAD_H_
