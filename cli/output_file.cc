// Output files written whole or not at all, and the output paths checked against the inputs before a run.
#include "cli/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <system_error>
#include <utility>

namespace kvshard::cli {
namespace {

namespace fs = std::filesystem;

// The file a path names, following links; nullopt when it does not exist (or cannot be looked at).
std::optional<struct stat> StatOf(const std::string& path) {
  struct stat st;
  if (path.empty() || path == "-" || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st;
}

bool SameFile(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// The absolute, normalised spelling of a path whose file may not exist yet (its existing prefix resolved).
std::string Spelling(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path, ec).lexically_normal();
  return p.string();
}

std::string Quoted(const FlagPath& p) { return "--" + p.flag + " (" + p.path + ")"; }

}  // namespace

Status CheckOutputPaths(const std::vector<FlagPath>& inputs, const std::vector<FlagPath>& outputs) {
  const FlagPath* on_stdout = nullptr;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const FlagPath& out = outputs[i];
    if (out.path == "-") {
      if (on_stdout != nullptr) {
        return InvalidArgument("--", out.flag, ": standard output (-) is taken by --", on_stdout->flag);
      }
      on_stdout = &out;
      continue;
    }
    const std::optional<struct stat> st = StatOf(out.path);
    if (st && S_ISCHR(st->st_mode)) continue;  // /dev/null and friends: nothing to destroy
    for (const FlagPath& in : inputs) {
      const std::optional<struct stat> in_st = StatOf(in.path);
      if (st && in_st && SameFile(*st, *in_st)) {
        return InvalidArgument("--", out.flag, ": ", out.path, " is the input of ", Quoted(in),
                               "; writing it would destroy the input");
      }
    }
    for (size_t j = 0; j < i; ++j) {
      const FlagPath& other = outputs[j];
      if (other.path == "-") continue;
      const std::optional<struct stat> other_st = StatOf(other.path);
      const bool same = st && other_st ? SameFile(*st, *other_st) : Spelling(out.path) == Spelling(other.path);
      if (same) return InvalidArgument("--", out.flag, ": ", out.path, " is also the output of ", Quoted(other));
    }
  }
  return Status::Ok();
}

OutputFile::OutputFile(std::string flag, std::string path, std::string temp, std::unique_ptr<std::ostream> file,
                       std::ostream& standard_output)
    : flag_(std::move(flag)),
      path_(std::move(path)),
      temp_(std::move(temp)),
      direct_(std::move(file)),
      counter_(direct_ ? direct_->rdbuf() : standard_output.rdbuf()),
      stream_(&counter_) {}

OutputFile::~OutputFile() {
  if (committed_ || temp_.empty()) return;
  direct_.reset();
  std::remove(temp_.c_str());
}

StatusOr<std::unique_ptr<OutputFile>> OutputFile::Open(const std::string& flag, const std::string& path,
                                                       std::ostream& standard_output) {
  if (path.empty()) return InvalidArgument("--", flag, ": needs a file name (or - for standard output)");
  if (path == "-") return std::unique_ptr<OutputFile>(new OutputFile(flag, path, "", nullptr, standard_output));
  std::error_code ec;
  if (fs::is_directory(path, ec)) return InvalidArgument("--", flag, ": ", path, " is a directory");
  const std::optional<struct stat> st = StatOf(path);
  if (st && !S_ISREG(st->st_mode)) {  // a FIFO or a device: written in place, nothing to replace
    auto file = std::make_unique<std::ofstream>(path, std::ios::binary);
    if (!*file) return InvalidArgument("--", flag, ": ", path, ": cannot open for writing: ", std::strerror(errno));
    return std::unique_ptr<OutputFile>(new OutputFile(flag, path, "", std::move(file), standard_output));
  }
  fs::path target = path;
  if (fs::is_symlink(target, ec)) {  // replace the file the link names, not the link
    const fs::path resolved = fs::weakly_canonical(target, ec);
    if (!ec) target = resolved;
  }
  static std::atomic<int> serial{0};
  const fs::path temp = target.parent_path() / ("." + target.filename().string() + ".kvshard-" +
                                                std::to_string(::getpid()) + "-" + std::to_string(serial++));
  errno = 0;
  auto file = std::make_unique<std::ofstream>(temp, std::ios::binary | std::ios::trunc);
  if (!*file) {
    const std::string why = errno ? std::strerror(errno) : "cannot create a file in its directory";
    return InvalidArgument("--", flag, ": ", path, ": cannot open for writing: ", why);
  }
  if (const std::optional<struct stat> old = StatOf(target.string())) {
    ::chmod(temp.c_str(), old->st_mode & 07777);  // the replacement keeps the file's permissions
  }
  auto out = std::unique_ptr<OutputFile>(new OutputFile(flag, path, temp.string(), std::move(file), standard_output));
  out->target_ = target.string();
  return out;
}

Status OutputFile::Commit() {
  stream_.flush();
  bool ok = static_cast<bool>(stream_);
  int why = errno;
  if (direct_) {
    direct_->flush();
    if (auto* file = dynamic_cast<std::ofstream*>(direct_.get())) file->close();
    ok = ok && static_cast<bool>(*direct_);
    why = errno;
  }
  if (!ok)
    return InvalidArgument("--", flag_, ": ", path_, ": write failed", why ? ": " : "", why ? std::strerror(why) : "");
  if (!temp_.empty()) {
    if (std::rename(temp_.c_str(), target_.c_str()) != 0) {
      return InvalidArgument("--", flag_, ": ", path_, ": cannot replace it: ", std::strerror(errno));
    }
  }
  committed_ = true;
  return Status::Ok();
}

OutputFile::CountingBuffer::int_type OutputFile::CountingBuffer::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  if (traits_type::eq_int_type(target_->sputc(traits_type::to_char_type(c)), traits_type::eof())) {
    return traits_type::eof();
  }
  ++bytes_;
  return c;
}

std::streamsize OutputFile::CountingBuffer::xsputn(const char* s, std::streamsize n) {
  const std::streamsize put = target_->sputn(s, n);
  bytes_ += put;
  return put;
}

int OutputFile::CountingBuffer::sync() { return target_->pubsync(); }

}  // namespace kvshard::cli
