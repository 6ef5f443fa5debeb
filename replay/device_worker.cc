// DeviceWorker: a mutex-guarded deque and one condition variable; the step runs outside the lock.
#include "replay/device_worker.h"

#include <chrono>
#include <utility>

namespace kvshard::replay {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

DeviceWorker::DeviceWorker(size_t max_queued_bytes)
    : max_queued_bytes_(max_queued_bytes), thread_([this] { Run(); }) {}

DeviceWorker::~DeviceWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void DeviceWorker::Submit(size_t bytes, std::function<void()> step) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto admits = [&] { return queue_.empty() || queued_bytes_ + bytes <= max_queued_bytes_; };
  if (!admits()) {
    const int64_t start = NowNs();
    changed_.wait(lock, admits);
    waited_ns_.fetch_add(NowNs() - start, std::memory_order_relaxed);
  }
  queue_.push_back({bytes, std::move(step)});
  queued_bytes_ += bytes;
  ++submitted_;
  lock.unlock();
  changed_.notify_all();
}

void DeviceWorker::Settle() {
  const int64_t start = NowNs();
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return done_.load(std::memory_order_acquire) == submitted_; });
  waited_ns_.fetch_add(NowNs() - start, std::memory_order_relaxed);
}

void DeviceWorker::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, and nothing left to run
    Queued q = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    const int64_t start = NowNs();
    q.step();
    q.step = nullptr;  // its payload goes before the queue admits more
    busy_ns_.fetch_add(NowNs() - start, std::memory_order_relaxed);
    lock.lock();
    queued_bytes_ -= q.bytes;
    done_.fetch_add(1, std::memory_order_release);
    changed_.notify_all();
  }
}

}  // namespace kvshard::replay
