// DeviceWorker: steps run in submission order on one other thread, Settle waits for all of them, the byte bound
// holds the submitter back (and lets a step larger than the bound through alone), the destructor runs what is left;
// the queue drops the steps already taken without losing or reordering the rest.
#include "replay/device_worker.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace kvshard::replay {
namespace {

TEST(DeviceWorkerTest, RunsStepsInOrderOnAnotherThread) {
  std::vector<int> order;  // written by the worker only, read after Settle
  std::atomic<bool> other_thread{true};
  const std::thread::id caller = std::this_thread::get_id();
  DeviceWorker worker(1 << 20);
  for (int i = 0; i < 1000; ++i) {
    worker.Submit(16, [&, i] {
      if (std::this_thread::get_id() == caller) other_thread = false;
      order.push_back(i);
    });
  }
  worker.Settle();
  EXPECT_EQ(worker.done(), 1000);
  EXPECT_TRUE(other_thread);
  ASSERT_EQ(order.size(), 1000u);
  int first_wrong = -1;
  for (int i = 0; i < 1000 && first_wrong < 0; ++i) {
    if (order[i] != i) first_wrong = i;
  }
  EXPECT_EQ(first_wrong, -1) << "order[" << first_wrong << "] = " << order[first_wrong];
}

// The worker takes 301 of 512 queued steps and waits; the next group handed over drops the taken ones from the
// queue's front (DeviceWorker::Push) while the rest wait to run: every step still runs once, in order.
TEST(DeviceWorkerTest, TakenStepsAreDroppedFromTheQueueInOrder) {
  std::vector<int> order;  // written by the worker only, read after Settle
  std::atomic<bool> start{false}, reached{false}, resume{false};
  DeviceWorker worker(1 << 20);
  auto step = [&](int i) {
    return [&, i] {
      if (i == 0) {
        while (!start) std::this_thread::yield();
      }
      if (i == 300) {
        reached = true;
        while (!resume) std::this_thread::yield();
      }
      order.push_back(i);
    };
  };
  for (int i = 0; i < 512; ++i) worker.Submit(1, step(i));  // 512 = 32 groups of 16: all handed over
  start = true;
  while (!reached) std::this_thread::yield();
  for (int i = 512; i < 528; ++i) worker.Submit(1, step(i));  // handed over past 301 taken steps
  resume = true;
  worker.Settle();
  ASSERT_EQ(order.size(), 528u);
  int first_wrong = -1;
  for (int i = 0; i < 528 && first_wrong < 0; ++i) {
    if (order[i] != i) first_wrong = i;
  }
  EXPECT_EQ(first_wrong, -1) << "order[" << first_wrong << "] = " << order[first_wrong];
}

TEST(DeviceWorkerTest, TheByteBoundHoldsTheSubmitterBack) {
  std::atomic<int> running{0}, queued_peak{0};
  std::atomic<int> submitted{0}, finished{0};
  {
    DeviceWorker worker(100);  // two steps of 40 bytes fit, a third waits
    for (int i = 0; i < 50; ++i) {
      worker.Submit(40, [&] {
        running = 1;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        ++finished;
      });
      ++submitted;
      const int in_queue = submitted - finished;  // running one included
      if (in_queue > queued_peak) queued_peak = in_queue;
    }
    worker.Submit(1000, [&] { ++finished; });  // larger than the bound: runs once the queue is empty
  }                                            // the destructor runs what is left
  EXPECT_EQ(finished, 51);
  EXPECT_LE(queued_peak, 4) << "the queue held more than its 100 bytes allow (2 queued + 1 running + 1 racing)";
  EXPECT_EQ(running, 1);
}

// The first step is handed over at once (the device's set-up starts early), later ones in groups of 16.
TEST(DeviceWorkerTest, StepsAreHandedOverInGroups) {
  DeviceWorker worker(1 << 20);
  std::atomic<int> ran{0};
  const auto wait_for = [&](int n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (ran < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  worker.Submit(8, [&] { ++ran; });
  wait_for(1);
  EXPECT_EQ(ran, 1) << "the first step was not handed over";
  for (int i = 0; i < 15; ++i) worker.Submit(8, [&] { ++ran; });  // 15 pending: not handed over yet
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ran, 1) << "steps ran before their group was handed over";
  EXPECT_EQ(worker.done(), 1);
  worker.Submit(8, [&] { ++ran; });  // the 16th pending step hands the group over
  wait_for(17);
  EXPECT_EQ(ran, 17);
  worker.Submit(8, [&] { ++ran; });
  worker.Settle();  // hands over what is pending
  EXPECT_EQ(ran, 18);
  EXPECT_EQ(worker.done(), 18);
}

// A large step hands its group over at once: a quarter of the bound.
TEST(DeviceWorkerTest, AGroupOfAQuarterOfTheBoundIsHandedOver) {
  DeviceWorker worker(1000);
  std::atomic<int> ran{0};
  worker.Submit(1, [&] { ++ran; });
  worker.Submit(100, [&] { ++ran; });
  worker.Submit(200, [&] { ++ran; });  // 300 of 1000 pending: handed over
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ran < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(ran, 3);
}

TEST(DeviceWorkerTest, SettleWithNothingSubmittedReturns) {
  DeviceWorker worker(1);
  worker.Settle();
  EXPECT_EQ(worker.done(), 0);
}

}  // namespace
}  // namespace kvshard::replay
