// A command's tasks (one per input: the traces of `replay A B C --jobs N`) on up to N threads at once, their text on
// the command's one output stream in task order, as if they had run one after another: the task whose turn it is
// writes straight through, the others into a buffer of their own, shown when their turn comes. The caller takes the
// tasks' outcomes in order (Wait, Release) and may stop the rest at any of them (Cancel).
#ifndef KVSHARD_CLI_ORDERED_JOBS_H_
#define KVSHARD_CLI_ORDERED_JOBS_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace kvshard::cli {

class OrderedJobs {
 public:
  // What a task writes to; its text reaches the command's stream in task order.
  class Output {
   public:
    std::ostream& stream() { return stream_; }
    // Runs `lead` on the command's stream just before this task's text is shown there (at once when it is the
    // task's turn): what goes between two tasks' text, known only in order (a separator). Call it before any text.
    void Lead(std::function<void(std::ostream&)> lead);
    // True once the command cancelled the tasks (OrderedJobs::Cancel): a task may poll it to stop early.
    const std::atomic<bool>* cancelled() const { return &buf_.jobs_->cancelled_; }

   private:
    friend class OrderedJobs;
    // The task's bytes, handed to OrderedJobs::Write (unbuffered: each write keeps its place in order).
    struct Buf : public std::streambuf {
      Buf(OrderedJobs* jobs, int index) : jobs_(jobs), index_(index) {}
      int_type overflow(int_type c) override;
      std::streamsize xsputn(const char* s, std::streamsize n) override;
      OrderedJobs* const jobs_;
      const int index_;
    };
    Output(OrderedJobs* jobs, int index) : buf_(jobs, index), stream_(&buf_) {}
    Buf buf_;
    std::ostream stream_;
  };

  // Task `index` of `count` (0 .. count - 1), started in index order.
  using Task = std::function<void(int index, Output& out)>;

  // Runs `count` tasks on `jobs` threads (at most `count`), their text to `out`. With jobs <= 1 no thread is made:
  // Wait(i) runs task i on the calling thread, its text straight to `out` (so too where the system gives no thread). A
  // waiting task's buffer holds up to `buffer_bytes`; past that the task waits for its turn (memory stays bounded
  // however much a task prints).
  OrderedJobs(int count, int jobs, std::ostream& out, Task task, size_t buffer_bytes = size_t{1} << 20);
  // Cancels what has not finished and joins the threads.
  ~OrderedJobs();

  OrderedJobs(const OrderedJobs&) = delete;
  OrderedJobs& operator=(const OrderedJobs&) = delete;

  // Waits until task `index` has finished (with jobs <= 1: runs it). Called for 0, 1, ... in turn, each after the
  // Release of the one before: the task's text is then all on the stream, and nothing else writes to it until
  // Release(index), so the caller may add its own. An exception the task threw on its thread is thrown here, as
  // if the task had run on the caller's.
  void Wait(int index);
  // The next task's turn: its buffered text is shown (after its lead), and from now on it writes straight through.
  void Release(int index);
  // No task starts any more; running ones see cancelled() true, and their text is dropped. The caller's last Wait'ed
  // task's text is already on the stream.
  void Cancel();

 private:
  struct Slot {
    std::string text;                         // written while it was not the task's turn
    std::function<void(std::ostream&)> lead;  // run before `text` is shown
    bool done = false;
    std::exception_ptr thrown;  // what the task threw on its thread, for Wait to throw
  };
  // The task's bytes: to the stream on its turn, else to its buffer (and, once that is full, it waits for its turn).
  void Write(int index, const char* data, size_t n);
  void WorkerLoop();

  const int count_;
  std::ostream& out_;
  const Task task_;
  const size_t buffer_bytes_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Slot> slots_;
  int head_ = 0;  // whose turn it is: that task writes straight to out_
  int next_ = 0;  // the next task a thread starts
  std::atomic<bool> cancelled_{false};
  std::vector<std::thread> threads_;
};

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_ORDERED_JOBS_H_
