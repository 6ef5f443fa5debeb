// The trace read-ahead: reader threads ahead of the caller, records handed over in order.
#include "core/trace_read_ahead.h"

#include <system_error>
#include <utility>

namespace kvshard {

TraceReadAhead::TraceReadAhead(TraceReader* reader, Prepare prepare) : reader_(reader), prepare_(std::move(prepare)) {
  try {
    thread_ = std::thread([this] { ReadAll(); });
  } catch (const std::system_error&) {  // no thread to be had: Next reads in the caller
  }
}

TraceReadAhead::~TraceReadAhead() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  reader_wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TraceReadAhead::ReadAll() {
  while (true) {
    Item item;
    bool ahead = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Room: fewer records than the bound queued and the bytes within kReadAheadBytes (an empty queue waits only for
      // the caller to hand back a large record). Once full, wait until half of the records were taken.
      const auto room = [this](size_t records) {
        return queue_.size() < records &&
               (queue_.empty() ? held_bytes_ : queued_bytes_ + held_bytes_) <= kReadAheadBytes;
      };
      if (!room(kReadAheadRecords)) {
        reader_waiting_ = true;
        if (caller_waiting_ != kNotWaiting) caller_wake_.notify_one();  // take what is queued: no more comes now
        reader_wake_.wait(lock, [&] { return stop_ || room(kReadAheadRecords / 2); });
        reader_waiting_ = false;
      }
      if (stop_) return;
      if (!spare_.empty()) {
        item.record = std::move(spare_.back());
        spare_.pop_back();
      }
      ahead = queue_.size() >= kReadAheadRecords / 2;
    }
    try {
      item.more = reader_->Next(&item.record);
      item.bytes = reader_->line_bytes();
      if (prepare_ && item.more.ok() && *item.more) prepare_(&item.record, ahead);
    } catch (...) {  // out of memory, say: the caller rethrows it in order
      item.exception = std::current_exception();
    }
    const bool last = item.exception || !item.more.ok() || !*item.more;
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queued_bytes_ += item.bytes;
      queue_.push_back(std::move(item));
      ended_ = last;
      wake = caller_waiting_ == kWaitingForAny ||
             (caller_waiting_ == kWaitingForBatch && (queue_.size() >= kWakeBatch || last));
    }
    if (wake) caller_wake_.notify_one();
    if (last) return;
  }
}

StatusOr<bool> TraceReadAhead::Next(TraceRecord* record) {
  if (!thread_.joinable()) {
    StatusOr<bool> more = reader_->Next(record);
    if (prepare_ && more.ok() && *more) prepare_(record, true);
    return more;
  }
  handed_back_.push_back(std::move(*record));  // the caller is done with the record it held
  bool wake = false;
  if (taken_.empty()) {  // take every queued record at once: one lock and one wake-up for them all
    std::unique_lock<std::mutex> lock(mu_);
    held_bytes_ = 0;
    for (TraceRecord& r : handed_back_) spare_.push_back(std::move(r));
    handed_back_.clear();
    if (queue_.empty() && !ended_) {
      // Wait for a few records (one wake-up for them, not one each), but only briefly: a live trace on a pipe may
      // pause for long, and what it wrote is checked at once.
      caller_waiting_ = kWaitingForBatch;
      if (reader_waiting_) reader_wake_.notify_one();
      caller_wake_.wait_for(lock, kBatchWait, [this] {
        return queue_.size() >= kWakeBatch || ended_ || (reader_waiting_ && !queue_.empty());
      });
      if (queue_.empty() && !ended_) {
        caller_waiting_ = kWaitingForAny;
        caller_wake_.wait(lock, [this] { return !queue_.empty() || ended_; });
      }
      caller_waiting_ = kNotWaiting;
    }
    if (queue_.empty()) return false;  // called again after the end
    taken_.swap(queue_);
    held_bytes_ = queued_bytes_;  // held until the caller is done with all of them
    queued_bytes_ = 0;
    wake = reader_waiting_;  // the queue is empty: room for it again
  }
  Item item = std::move(taken_.front());
  taken_.pop_front();
  if (wake) reader_wake_.notify_one();
  if (item.exception) std::rethrow_exception(item.exception);
  *record = std::move(item.record);
  return item.more;
}

}  // namespace kvshard
