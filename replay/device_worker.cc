// DeviceWorker: a mutex-guarded queue and condition variables; the step runs outside the lock.
#include "replay/device_worker.h"

#include <chrono>
#include <utility>

namespace kvshard::replay {
namespace {

// Steps are handed over (one lock, at most one wake-up of an idle worker) once this many are pending, or at a
// settle, at a quarter of the bound, at the first step: a contended lock moves its cache line between the cores,
// and a wake-up is a futex call on each side and, on a busy host, a context switch.
constexpr size_t kHandOverEvery = 16;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

DeviceWorker::DeviceWorker(size_t max_queued_bytes) : max_queued_bytes_(max_queued_bytes), thread_([this] { Run(); }) {}

DeviceWorker::~DeviceWorker() {
  HandOver();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
}

void DeviceWorker::DestroySpent() {
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    destroying_.swap(spent_);  // spent_ gets destroying_'s empty buffer: neither buffer is freed on either thread
  }
  for (const Queued& q : destroying_) bytes += q.bytes;
  destroying_.clear();  // the payloads go here, on this thread
  if (bytes == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  queued_bytes_ -= bytes;
}

void DeviceWorker::Submit(size_t bytes, std::function<void()> step) {
  pending_.push_back({bytes, std::move(step)});
  pending_bytes_ += bytes;
  const bool first = !std::exchange(any_submitted_, true);
  if (first || pending_.size() >= kHandOverEvery || pending_bytes_ >= max_queued_bytes_ / 4) HandOver();
}

// Moves the pending group into the queue in order (each step waiting for room), then wakes an idle worker.
void DeviceWorker::HandOver() {
  if (pending_.empty()) return;
  DestroySpent();
  std::unique_lock<std::mutex> lock(mu_);
  for (Queued& q : pending_) {
    // Spent steps count until destroyed: while the bound holds the submitter back, it destroys what ran meanwhile.
    while (queued_bytes_ + q.bytes > max_queued_bytes_ && !(QueueEmpty() && spent_.empty())) {
      if (!spent_.empty()) {
        lock.unlock();
        DestroySpent();
        lock.lock();
        continue;
      }
      const int64_t start = NowNs();
      if (worker_idle_) work_.notify_one();  // the queue is full: the worker must run now
      host_waiting_ = true;
      host_.wait(lock, [&] { return !spent_.empty() || QueueEmpty(); });  // a step ran
      host_waiting_ = false;
      waited_ns_.fetch_add(NowNs() - start, std::memory_order_relaxed);
    }
    queued_bytes_ += q.bytes;
    Push(std::move(q));
    ++submitted_;
  }
  pending_.clear();
  pending_bytes_ = 0;
  const bool wake = worker_idle_;
  lock.unlock();
  if (wake) work_.notify_one();
}

void DeviceWorker::Settle() {
  HandOver();
  const int64_t start = NowNs();
  std::unique_lock<std::mutex> lock(mu_);
  if (worker_idle_ && !QueueEmpty()) work_.notify_one();
  host_waiting_ = true;
  host_.wait(lock, [&] { return done_.load(std::memory_order_acquire) == submitted_; });
  host_waiting_ = false;
  waited_ns_.fetch_add(NowNs() - start, std::memory_order_relaxed);
  lock.unlock();
  DestroySpent();
}

bool DeviceWorker::Drained() {
  std::lock_guard<std::mutex> lock(mu_);
  return QueueEmpty();
}

void DeviceWorker::Push(Queued q) {
  if (queue_head_ == queue_.size()) {  // all taken: start over at the buffer's front
    queue_.clear();
    queue_head_ = 0;
  } else if (queue_head_ >= 256 && 2 * queue_head_ >= queue_.size()) {  // the taken half (moved from) goes
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(queue_head_));
    queue_head_ = 0;
  }
  queue_.push_back(std::move(q));
}

void DeviceWorker::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    worker_idle_ = true;
    work_.wait(lock, [&] { return stop_ || !QueueEmpty(); });
    worker_idle_ = false;
    if (QueueEmpty()) return;                     // stop_, and nothing left to run
    Queued q = std::move(queue_[queue_head_++]);  // its moved-from item stays for the submitter to drop
    lock.unlock();
    const int64_t start = NowNs();
    q.step();
    busy_ns_.fetch_add(NowNs() - start, std::memory_order_relaxed);
    lock.lock();
    spent_.push_back(std::move(q));  // destroyed by the submitting thread
    done_.fetch_add(1, std::memory_order_release);
    if (host_waiting_) host_.notify_all();
  }
}

}  // namespace kvshard::replay
