// OrderedJobs: the tasks' threads, their buffers and the turn that passes from task to task.
#include "cli/ordered_jobs.h"

#include <algorithm>
#include <system_error>
#include <utility>

#include "core/status.h"

namespace kvshard::cli {

void OrderedJobs::Output::Lead(std::function<void(std::ostream&)> lead) {
  OrderedJobs& jobs = *buf_.jobs_;
  std::unique_lock<std::mutex> lock(jobs.mu_);
  if (jobs.cancelled_.load(std::memory_order_relaxed)) return;
  if (buf_.index_ == jobs.head_) {
    lead(jobs.out_);
  } else {
    jobs.slots_[buf_.index_].lead = std::move(lead);
  }
}

OrderedJobs::Output::Buf::int_type OrderedJobs::Output::Buf::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  const char ch = traits_type::to_char_type(c);
  jobs_->Write(index_, &ch, 1);
  return c;
}

std::streamsize OrderedJobs::Output::Buf::xsputn(const char* s, std::streamsize n) {
  if (n > 0) jobs_->Write(index_, s, static_cast<size_t>(n));
  return n;
}

OrderedJobs::OrderedJobs(int count, int jobs, std::ostream& out, Task task, size_t buffer_bytes)
    : count_(count), out_(out), task_(std::move(task)), buffer_bytes_(buffer_bytes), slots_(std::max(count, 0)) {
  const int threads = std::min(jobs, count);
  if (threads <= 1) return;  // Wait runs each task itself
  try {
    for (int t = 0; t < threads; ++t) threads_.emplace_back([this] { WorkerLoop(); });
  } catch (const std::system_error&) {  // fewer threads than asked (none: Wait runs each task itself)
  }
}

OrderedJobs::~OrderedJobs() {
  Cancel();
  for (std::thread& t : threads_) t.join();
}

void OrderedJobs::WorkerLoop() {
  for (;;) {
    int index;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cancelled_.load(std::memory_order_relaxed) || next_ >= count_) return;
      index = next_++;
    }
    Output output(this, index);
    std::exception_ptr thrown;
    try {
      task_(index, output);
    } catch (...) {  // thrown again by Wait, on the caller's thread
      thrown = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mu_);
    slots_[index].thrown = thrown;
    slots_[index].done = true;
    changed_.notify_all();
  }
}

void OrderedJobs::Wait(int index) {
  KVSHARD_CHECK(index == head_ && index < count_);
  if (threads_.empty()) {  // no threads: the task runs here, on its turn
    Output output(this, index);
    task_(index, output);
    slots_[index].done = true;
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return slots_[index].done; });
  if (slots_[index].thrown) std::rethrow_exception(std::exchange(slots_[index].thrown, nullptr));
}

void OrderedJobs::Release(int index) {
  std::unique_lock<std::mutex> lock(mu_);
  KVSHARD_CHECK(index == head_ && slots_[index].done);
  ++head_;
  if (head_ < count_) {
    Slot& next = slots_[head_];
    if (next.lead) std::exchange(next.lead, nullptr)(out_);
    out_.write(next.text.data(), static_cast<std::streamsize>(next.text.size()));
    std::string().swap(next.text);
  }
  changed_.notify_all();  // a task waiting with a full buffer may go on
}

void OrderedJobs::Cancel() {
  std::unique_lock<std::mutex> lock(mu_);
  cancelled_.store(true, std::memory_order_relaxed);
  changed_.notify_all();
}

void OrderedJobs::Write(int index, const char* data, size_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  if (cancelled_.load(std::memory_order_relaxed) && index != head_) return;  // a cancelled task's text is dropped
  if (index == head_) {
    out_.write(data, static_cast<std::streamsize>(n));
    return;
  }
  Slot& slot = slots_[index];
  slot.text.append(data, n);
  // A full buffer waits for its turn (Release shows it) or for the end (Cancel drops it).
  changed_.wait(lock, [&] {
    return slot.text.size() <= buffer_bytes_ || index == head_ || cancelled_.load(std::memory_order_relaxed);
  });
}

}  // namespace kvshard::cli
