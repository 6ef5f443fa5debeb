// A thread that runs a replay's device steps in the order they are submitted, so `replay --backend gpu|diff`
// check on the host while the device path works through the same records (docs/trace-format.md, "Where
// --backend gpu|diff report a device difference"). The queue is bounded in bytes: memory stays flat in trace length.
// A step that ran is destroyed (its payload freed) on the submitting thread, when it next hands steps over: glibc
// frees memory into the arena of the thread that allocated it, and a worker freeing the submitter's payloads
// contends for that arena's lock with the submitter's own allocations. Steps are handed over in groups (16 steps,
// a quarter of the bound, the first step, or a Settle): one lock and at most one wake-up per group.
#ifndef KVSHARD_REPLAY_DEVICE_WORKER_H_
#define KVSHARD_REPLAY_DEVICE_WORKER_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvshard::replay {

// One worker thread, steps run one at a time in submission order.
class DeviceWorker {
 public:
  // Queued steps may hold up to `max_queued_bytes` of payload together (a larger step waits for an empty queue), plus
  // the group not handed over yet (less than a quarter of that, or 16 steps).
  explicit DeviceWorker(size_t max_queued_bytes);
  // Hands over and runs what is still pending or queued, then joins.
  ~DeviceWorker();
  DeviceWorker(const DeviceWorker&) = delete;
  DeviceWorker& operator=(const DeviceWorker&) = delete;

  // Adds `step`, which holds `bytes` of payload (counted until the step is destroyed here), to the pending group;
  // hands the group over when it is due, blocking while the queue is full and destroying the steps that ran.
  void Submit(size_t bytes, std::function<void()> step);
  // Hands the pending group over now (blocking while the queue is full): for a step the worker should start at once.
  void HandOver();
  // Hands over what is pending, waits until every step submitted so far has run, and destroys them.
  void Settle();
  // Whether no handed-over step waits behind the running one: a step may then do work it deferred (the host is not
  // ahead of the worker). Steps the submitter has not handed over yet do not count.
  bool Drained();
  // Steps that have run so far (acquire: what a step wrote before it finished is visible); every one of them was
  // handed over, so a caller counting its submissions may see fewer done until it settles.
  int64_t done() const { return done_.load(std::memory_order_acquire); }
  // Seconds the worker spent running steps, and seconds callers of Submit and Settle spent waiting for it.
  double busy_seconds() const { return busy_ns_.load(std::memory_order_relaxed) * 1e-9; }
  double waited_seconds() const { return waited_ns_.load(std::memory_order_relaxed) * 1e-9; }

 private:
  struct Queued {
    size_t bytes;
    std::function<void()> step;
  };
  void Run();
  // Destroys the steps that ran, outside the lock (their bytes leave the bound then).
  void DestroySpent();

  const size_t max_queued_bytes_;
  std::mutex mu_;
  std::condition_variable work_;  // the worker waits here: steps were queued, or it is asked to stop
  std::condition_variable host_;  // the submitter waits here: a step finished
  bool worker_idle_ = false;      // the worker waits on work_
  bool host_waiting_ = false;     // the submitter waits on host_
  // Handed over, not yet run: queue_[queue_head_, end). A vector that only the submitting thread grows and trims
  // (Push): a deque's nodes would be made by the submitter and freed by the worker, into the submitter's heap arena
  // under its lock (tools/bench/cross_frees.c).
  std::vector<Queued> queue_;
  size_t queue_head_ = 0;
  bool QueueEmpty() const { return queue_head_ == queue_.size(); }
  // Appends `q` (under mu_), first dropping the items already taken when that is all or at least half of queue_.
  void Push(Queued q);
  std::vector<Queued> spent_;       // ran, to be destroyed on the submitting thread
  std::vector<Queued> destroying_;  // the submitting thread's: spent steps being destroyed (its buffer kept)
  // The submitting thread's own: steps not handed over yet, their bytes, and whether any step was submitted.
  std::vector<Queued> pending_;
  size_t pending_bytes_ = 0;
  bool any_submitted_ = false;
  size_t queued_bytes_ = 0;
  int64_t submitted_ = 0;  // handed over
  std::atomic<int64_t> done_{0};
  std::atomic<int64_t> busy_ns_{0}, waited_ns_{0};
  bool stop_ = false;
  std::thread thread_;  // last: started once the members it uses exist
};

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_DEVICE_WORKER_H_
