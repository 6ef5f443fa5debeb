// The trace read-ahead: reader threads ahead of the caller, records handed over in line order.
#include "core/trace_read_ahead.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <string>
#include <system_error>
#include <utility>

namespace kvshard {
namespace {

// A live thread's CPU seconds (0 where its clock is not available).
double ThreadCpuSeconds(pthread_t thread) {
  clockid_t clock;
  timespec ts;
  if (pthread_getcpuclockid(thread, &clock) != 0 || clock_gettime(clock, &ts) != 0) return 0;
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

}  // namespace

TraceReadAhead::TraceReadAhead(TraceReader* reader, Prepare prepare, int threads)
    : reader_(reader), prepare_(std::move(prepare)) {
  threads = std::clamp(threads, 1, kMaxThreads);
  spare_.resize(threads);
  ended_cpu_.resize(threads);
  for (int i = 0; i < threads; ++i) {
    try {
      threads_.emplace_back([this, i] {
        ReadAll(i);
        const double cpu = ThreadCpuSeconds(pthread_self());
        std::lock_guard<std::mutex> lock(cpu_mu_);
        ended_cpu_[i] = cpu;
      });
    } catch (const std::system_error&) {  // no more threads to be had: those made read (none: Next reads)
      break;
    }
  }
}

TraceReadAhead::~TraceReadAhead() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  reader_wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

TraceReadAhead::Item& TraceReadAhead::ItemRing::emplace_back() {
  KVSHARD_CHECK(size_ < kReadAheadRecords);
  Item& item = (*this)[size_++];
  item = Item();
  return item;
}

void TraceReadAhead::ItemRing::pop_front() {
  head_ = (head_ + 1) % kReadAheadRecords;
  --size_;
}

bool TraceReadAhead::Publish(size_t index, Item item) {
  queue_[index] = std::move(item);
  while (!ended_ && ready_ < queue_.size() && queue_[ready_].ready) ended_ = queue_[ready_++].last;
  return (caller_waiting_ == kWaitingForAny && ready_ > 0) ||
         (caller_waiting_ == kWaitingForBatch && (ready_ >= kWakeBatch || ended_));
}

// The op a record line names first, as kvshard writes them ({"op":"alloc",...}), or "" for any other layout.
std::string_view TraceReadAhead::LeadingOp(std::string_view text) {
  constexpr std::string_view kLead = "{\"op\":\"";
  if (text.substr(0, kLead.size()) != kLead) return {};
  const size_t end = text.find('"', kLead.size());
  return end == std::string_view::npos ? std::string_view() : text.substr(kLead.size(), end - kLead.size());
}

void TraceReadAhead::TakeSpare(int reader, std::string_view op, TraceRecord* record) {
  std::vector<TraceRecord>& spares = spare_[reader];
  if (spares.empty()) return;
  size_t pick = spares.size() - 1;  // the last handed back, unless one of the line's op was handed back since
  for (size_t i = spares.size(); !op.empty() && i-- > 0;) {
    if (spares[i].op == op) {
      pick = i;
      break;
    }
  }
  *record = std::move(spares[pick]);
  if (pick != spares.size() - 1) spares[pick] = std::move(spares.back());
  spares.pop_back();
}

void TraceReadAhead::ReadAll(int reader) {
  std::string text;  // this thread's line
  while (true) {
    Item item;
    item.reader = reader;
    int64_t index = 0;  // the line's order number
    bool ahead = false, newline = true;
    int64_t line = 0;
    {
      std::lock_guard<std::mutex> read_lock(read_mu_);  // one line read at a time, in order
      if (read_ended_) return;
      {
        std::unique_lock<std::mutex> lock(mu_);
        // Room: fewer records than the bound queued and the bytes within kReadAheadBytes (an empty queue waits only
        // for the caller to hand back a large record). Once full, wait until half of the records were taken.
        const auto room = [this](size_t records) {
          return queue_.size() < records &&
                 (queue_.empty() ? held_bytes_ : queued_bytes_ + held_bytes_) <= kReadAheadBytes;
        };
        if (!stop_ && !failed_ && !room(kReadAheadRecords)) {
          ++readers_waiting_;
          if (caller_waiting_ != kNotWaiting) caller_wake_.notify_one();  // take what is ready: no more comes now
          reader_wake_.wait(lock, [&] { return stop_ || failed_ || room(kReadAheadRecords / 2); });
          --readers_waiting_;
        }
        if (stop_ || failed_) return;
        ahead = queue_.size() + taken_left_.load(std::memory_order_relaxed) >= kAheadRecords;
        index = first_index_ + static_cast<int64_t>(queue_.size());
        queue_.emplace_back();  // this line's place, filled by Publish
      }
      try {
        item.more = reader_->NextLine(&text, &newline, &line);
      } catch (...) {  // out of memory, say: the caller rethrows it in order
        item.exception = std::current_exception();
      }
      item.bytes = static_cast<int64_t>(text.size());
      if (item.exception || !item.more.ok() || !*item.more) read_ended_ = true;
      std::lock_guard<std::mutex> lock(mu_);
      queued_bytes_ += item.bytes;  // counted before the next line is read, so the next reader sees it
      TakeSpare(reader, LeadingOp(text), &item.record);
    }
    if (!item.exception && item.more.ok() && *item.more) {
      try {
        Status parsed = TraceReader::ParseRecord(text, newline, line, &item.record, &item.truncated_line);
        if (!parsed.ok()) item.more = parsed;
        if (parsed.ok() && prepare_) prepare_(&item.record, ahead);
      } catch (...) {
        item.exception = std::current_exception();
      }
    }
    if (text.capacity() > static_cast<size_t>(kReadAheadBytes)) std::string().swap(text);  // one large line's memory
    item.last = item.exception || !item.more.ok() || !*item.more;
    item.ready = true;
    const bool last = item.last;
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (last) failed_ = true;  // the readers stop (the end too: nothing after it is read)
      wake = Publish(static_cast<size_t>(index - first_index_), std::move(item));
    }
    if (last) reader_wake_.notify_all();  // a reader waiting for room stops
    if (wake) caller_wake_.notify_one();
    if (last) return;
  }
}

StatusOr<bool> TraceReadAhead::Next(TraceRecord* record) {
  if (threads_.empty()) {
    StatusOr<bool> more = reader_->Next(record);
    truncated_line_ = reader_->truncated_line();
    if (prepare_ && more.ok() && *more) prepare_(record, true);
    return more;
  }
  if (held_reader_ >= 0) handed_back_.emplace_back(held_reader_, std::move(*record));  // the caller is done with it
  held_reader_ = -1;
  bool wake = false;
  if (taken_.empty()) {  // take every ready record at once: one lock and one wake-up for them all
    std::unique_lock<std::mutex> lock(mu_);
    held_bytes_ = 0;
    for (auto& [reader, r] : handed_back_) spare_[reader].push_back(std::move(r));
    handed_back_.clear();
    if (ready_ == 0 && !ended_) {
      const auto asked = std::chrono::steady_clock::now();
      // Wait for a few records (one wake-up for them, not one each), but only briefly: a live trace on a pipe may
      // pause for long, and what it wrote is checked at once.
      caller_waiting_ = kWaitingForBatch;
      if (readers_waiting_ > 0) reader_wake_.notify_one();
      caller_wake_.wait_for(lock, kBatchWait,
                            [this] { return ready_ >= kWakeBatch || ended_ || (readers_waiting_ > 0 && ready_ > 0); });
      if (ready_ == 0 && !ended_) {
        caller_waiting_ = kWaitingForAny;
        caller_wake_.wait(lock, [this] { return ready_ > 0 || ended_; });
      }
      caller_waiting_ = kNotWaiting;
      caller_waited_ += std::chrono::steady_clock::now() - asked;
    }
    if (ready_ == 0) return false;  // called again after the end
    for (; ready_ > 0; --ready_) {
      held_bytes_ += queue_.front().bytes;
      queued_bytes_ -= queue_.front().bytes;
      taken_.emplace_back() = std::move(queue_.front());
      queue_.pop_front();
      ++first_index_;
    }
    // What the caller holds once it took the first, counted before a reader can see the emptier queue.
    taken_left_.store(taken_.size() - 1, std::memory_order_relaxed);
    wake = readers_waiting_ > 0;  // room for them again
  }
  Item item = std::move(taken_.front());
  taken_.pop_front();
  taken_left_.store(taken_.size(), std::memory_order_relaxed);
  if (wake) reader_wake_.notify_one();
  if (item.exception) std::rethrow_exception(item.exception);
  if (item.truncated_line != 0) truncated_line_ = item.truncated_line;
  *record = std::move(item.record);
  held_reader_ = item.reader;
  return item.more;
}

double CallingThreadCpuSeconds() { return ThreadCpuSeconds(pthread_self()); }

double TraceReadAhead::CallerWaitSeconds() const { return std::chrono::duration<double>(caller_waited_).count(); }

double TraceReadAhead::ReaderCpuSeconds() const {
  std::lock_guard<std::mutex> lock(cpu_mu_);  // a thread that ends meanwhile waits to record its figure
  double seconds = 0;
  for (size_t i = 0; i < threads_.size(); ++i) {
    seconds += ended_cpu_[i] ? *ended_cpu_[i] : ThreadCpuSeconds(const_cast<std::thread&>(threads_[i]).native_handle());
  }
  return seconds;
}

}  // namespace kvshard
