// OrderedJobs: the tasks' text in task order whatever finishes first, leads in order, a full buffer waiting for its
// turn, a cancel that drops the later text and starts nothing more, and one job on the calling thread.
#include "cli/ordered_jobs.h"

#include <atomic>
#include <chrono>
#include <future>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace kvshard::cli {
namespace {

// Runs tasks 0 .. count - 1 through Wait and Release, as the command does.
void RunAll(OrderedJobs& jobs, int count) {
  for (int i = 0; i < count; ++i) {
    jobs.Wait(i);
    jobs.Release(i);
  }
}

TEST(OrderedJobsTest, TextInTaskOrderWhateverFinishesFirst) {
  constexpr int kTasks = 5;
  std::promise<void> last_done;
  std::shared_future<void> last = last_done.get_future().share();
  std::ostringstream out;
  {
    OrderedJobs jobs(kTasks, 3, out, [&](int i, OrderedJobs::Output& o) {
      if (i == 0) last.wait();  // task 0 ends after every other task
      o.stream() << "task " << i << " line 1\n";
      o.stream() << "task " << i << " line 2\n";
      if (i == kTasks - 1) last_done.set_value();
    });
    RunAll(jobs, kTasks);
  }
  std::string want;
  for (int i = 0; i < kTasks; ++i)
    want += "task " + std::to_string(i) + " line 1\ntask " + std::to_string(i) + " line 2\n";
  EXPECT_EQ(out.str(), want);
}

TEST(OrderedJobsTest, LeadsRunInOrderBeforeTheirTaskText) {
  constexpr int kTasks = 6;
  std::ostringstream out;
  int leads = 0;  // touched only by the leads, which run in turn
  {
    OrderedJobs jobs(kTasks, 4, out, [&](int i, OrderedJobs::Output& o) {
      if (i % 3 == 2) return;  // a task that prints nothing has no lead
      std::this_thread::sleep_for(std::chrono::milliseconds(5 * (kTasks - i)));  // later tasks finish first
      o.Lead([&](std::ostream& s) { s << (leads++ == 0 ? "[" : ","); });
      o.stream() << i;
    });
    RunAll(jobs, kTasks);
  }
  EXPECT_EQ(out.str(), "[0,1,3,4");
}

TEST(OrderedJobsTest, AFullBufferWaitsForItsTurn) {
  std::ostringstream out;
  std::atomic<int> second_wrote{0};
  int seen_by_first = -1;
  {
    OrderedJobs jobs(
        2, 2, out,
        [&](int i, OrderedJobs::Output& o) {
          if (i == 0) {  // while it runs, task 1 may buffer 8 bytes and no more
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            seen_by_first = second_wrote.load();
            o.stream() << "first\n";
            return;
          }
          for (int k = 0; k < 100; ++k) {
            o.stream() << "0123456789";  // 10 bytes: past the buffer at once
            ++second_wrote;
          }
          o.stream() << "\n";
        },
        /*buffer_bytes=*/8);
    RunAll(jobs, 2);
  }
  EXPECT_EQ(seen_by_first, 0);  // its first write was waiting for its turn
  std::string want = "first\n";
  for (int k = 0; k < 100; ++k) want += "0123456789";
  EXPECT_EQ(out.str(), want + "\n");
}

TEST(OrderedJobsTest, CancelDropsTheLaterTextAndStartsNothingMore) {
  constexpr int kTasks = 6;
  std::ostringstream out;
  std::atomic<int> started{0};
  {
    OrderedJobs jobs(kTasks, 2, out, [&](int i, OrderedJobs::Output& o) {
      ++started;
      o.stream() << "task " << i << "\n";
      if (i == 0) return;
      while (!o.cancelled()->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      o.stream() << "after the cancel\n";
    });
    jobs.Wait(0);
    jobs.Cancel();
  }
  EXPECT_EQ(out.str(), "task 0\n");
  EXPECT_LE(started.load(), 3);  // task 0, then one task a thread, each held until the cancel
}

TEST(OrderedJobsTest, WhatATaskThrowsIsThrownByItsWait) {
  std::ostringstream out;
  OrderedJobs jobs(3, 3, out, [&](int i, OrderedJobs::Output& o) {
    o.stream() << i;
    if (i == 1) throw std::runtime_error("task 1 failed");
  });
  jobs.Wait(0);
  jobs.Release(0);
  EXPECT_THROW(
      {
        try {
          jobs.Wait(1);
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "task 1 failed");
          throw;
        }
      },
      std::runtime_error);
  jobs.Cancel();
  EXPECT_EQ(out.str(), "01");
}

TEST(OrderedJobsTest, OneJobRunsEachTaskOnTheCallingThreadAtItsWait) {
  constexpr int kTasks = 3;
  std::ostringstream out;
  std::vector<int> ran;
  std::vector<bool> here;
  const std::thread::id caller = std::this_thread::get_id();
  OrderedJobs jobs(kTasks, 1, out, [&](int i, OrderedJobs::Output& o) {
    ran.push_back(i);
    here.push_back(std::this_thread::get_id() == caller);
    o.Lead([](std::ostream& s) { s << "<"; });
    o.stream() << i;
  });
  EXPECT_TRUE(ran.empty());  // nothing runs before its Wait
  jobs.Wait(0);
  EXPECT_EQ(ran, std::vector<int>{0});
  EXPECT_EQ(out.str(), "<0");
  jobs.Release(0);
  jobs.Wait(1);
  jobs.Release(1);
  jobs.Wait(2);
  jobs.Release(2);
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(here, (std::vector<bool>{true, true, true}));
  EXPECT_EQ(out.str(), "<0<1<2");
}

}  // namespace
}  // namespace kvshard::cli
