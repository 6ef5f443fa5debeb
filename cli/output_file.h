// Output files that never destroy input and never leave a partial result: each is written to a temporary file
// beside its target and renamed over it only when the run succeeded, "-" writes standard output, and the paths of a
// run are checked before anything is opened (an output naming an input or another output is refused by name).
#ifndef KVSHARD_CLI_OUTPUT_FILE_H_
#define KVSHARD_CLI_OUTPUT_FILE_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

#include "core/status.h"

namespace kvshard::cli {

// A path a flag names ("workload" for --workload, or the positional's name).
struct FlagPath {
  std::string flag;
  std::string path;
};

// Refuses (InvalidArgument, exit 2) an output that names the same file as an input (same device and inode, so a
// link or another spelling is caught), two outputs that name one file (by inode, or by their absolute, normalised
// path when it does not exist yet), and more than one output on standard output ("-"). Inputs named "-" (standard
// input) and character devices (/dev/null) are never the same file as anything.
Status CheckOutputPaths(const std::vector<FlagPath>& inputs, const std::vector<FlagPath>& outputs);

// One output file of a run. Open() writes into ".<name>.kvshard-<pid>-<n>" in the target's directory (following a
// symbolic link to its target; a FIFO or device is written in place); Commit() flushes, closes and renames it over
// the target; an OutputFile destroyed before Commit() removes what it wrote, so a failed run leaves the old file (or
// none) untouched. "-" writes `standard_output` instead. Errors name the flag and the path.
class OutputFile {
 public:
  static StatusOr<std::unique_ptr<OutputFile>> Open(const std::string& flag, const std::string& path,
                                                    std::ostream& standard_output);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Where the output is written.
  std::ostream& stream() { return stream_; }
  // Bytes written so far.
  int64_t bytes() const { return counter_.bytes(); }
  // Makes the output the target's content (or flushes standard output); a write or rename failure is InvalidArgument
  // "--<flag>: <path>: write failed: <why>".
  Status Commit();

 private:
  // Counts the bytes passed on to another stream buffer.
  class CountingBuffer : public std::streambuf {
   public:
    explicit CountingBuffer(std::streambuf* target) : target_(target) {}
    int64_t bytes() const { return bytes_; }

   protected:
    int_type overflow(int_type c) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;
    int sync() override;

   private:
    std::streambuf* target_;
    int64_t bytes_ = 0;
  };

  OutputFile(std::string flag, std::string path, std::string temp, std::unique_ptr<std::ostream> file,
             std::ostream& standard_output);

  std::string flag_, path_, temp_;        // temp_ empty: written in place or to standard output
  std::string target_;                    // what temp_ is renamed to (path_ with a link followed)
  std::unique_ptr<std::ostream> direct_;  // the temporary (or in-place) file; null for "-"
  CountingBuffer counter_;
  std::ostream stream_;
  bool committed_ = false;
};

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_OUTPUT_FILE_H_
