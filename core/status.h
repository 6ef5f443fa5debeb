// Status and StatusOr: error values for everything that can fail on input (abseil-style, no exceptions).
// Exit-code mapping for the CLI lives here too, so every layer agrees on what "bad input" means.
#ifndef KVSHARD_CORE_STATUS_H_
#define KVSHARD_CORE_STATUS_H_

#include <charconv>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace kvshard {

// Error classes; the CLI maps them to exit codes (see ExitCodeFor).
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad input: exit 2
  kOutOfRange,          // bad input (capacity, index): exit 2
  kFailedPrecondition,  // an operation called in the wrong state: exit 2
  kMismatch,            // a verification found a difference: exit 1
  kUnavailable,         // no GPU / GPU support not built
  kInternal,            // CUDA / NCCL / system failure
};

// A success or an error with a message.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "CODE: message", for logs and test failures.
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

namespace status_internal {

// Integers wider than a byte (a 1-byte one is a character to a stream, bool is "0" / "1"); sizeof is asked only of
// integral types (StrCat's parts may be functions: std::hex).
template <typename T, bool = std::is_integral_v<T>>
struct IsWideInteger : std::false_type {};
template <typename T>
struct IsWideInteger<T, true> : std::bool_constant<!std::is_same_v<T, bool> && (sizeof(T) > 1)> {};

// The parts StrCat writes itself, exactly as `std::ostream <<` writes them: text, characters and wide integers.
template <typename T>
constexpr bool kAppendsDirectly =
    std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view> ||
    (std::is_array_v<T> && std::is_same_v<std::remove_cv_t<std::remove_extent_t<T>>, char>) ||
    std::is_same_v<std::decay_t<T>, const char*> || std::is_same_v<std::decay_t<T>, char*> || std::is_same_v<T, char> ||
    IsWideInteger<T>::value;

// Appends `v` (a kAppendsDirectly kind) to `out` as a stream writes it.
template <typename T>
void AppendPiece(std::string& out, const T& v) {
  if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view> || std::is_array_v<T>) {
    out.append(v);  // a literal (a char array) is never null
  } else if constexpr (std::is_same_v<std::decay_t<T>, const char*> || std::is_same_v<std::decay_t<T>, char*>) {
    if (v != nullptr) out.append(v);  // a null one: a stream writes nothing (and sets its badbit)
  } else if constexpr (std::is_same_v<T, char>) {
    out.push_back(v);
  } else {
    char digits[24];
    const std::to_chars_result end = std::to_chars(digits, digits + sizeof(digits), v);
    out.append(digits, end.ptr);
  }
}

}  // namespace status_internal

// Builds a message from streamable parts, as one `std::ostream` writes them in turn: StrCat("x=", 3). Parts that
// are only text and integers (the replay's hot paths name a record's fields this way) are appended without a
// stream; any other part (bool, floats, 1-byte integers, enums, pointers, types with their own operator<<, and
// manipulators such as std::hex, which change how the parts after them are written) sends every part through one
// stream.
template <typename... Args>
std::string StrCat(const Args&... args) {
  if constexpr ((status_internal::kAppendsDirectly<Args> && ...)) {
    std::string out;
    (status_internal::AppendPiece(out, args), ...);
    return out;
  } else {
    std::ostringstream os;
    (os << ... << args);
    return os.str();
  }
}

// The most characters QuoteInput shows of a value (an escape such as \u200b counts its length) before cutting it.
inline constexpr size_t kMaxQuotedChars = 64;

// `text` (a value from the input) as an error message shows it: between `quote`s ('\0': none); printable ASCII and
// visible UTF-8 kept; control characters, DEL, bytes outside well-formed UTF-8, invisible and format characters
// (BOM, zero-width and bidi controls, no-break space, soft hyphen), the backslash and `quote` escaped ("\n",
// "\x00", "\xff", "\ufeff", "\\", "\""); past kMaxQuotedChars cut with "…" and its length after the quote:
// "aaaa…" (1048576 bytes). A short plain value comes out as "value".
std::string QuoteInput(std::string_view text, char quote = '"');

// `status` with `parts` put before its message (context: "line 3: ", "frees[2]."); its code kept, OK stays OK.
template <typename... Args>
Status Annotate(const Status& status, const Args&... parts) {
  if (status.ok()) return status;
  return Status(status.code(), StrCat(parts..., status.message()));
}

template <typename... Args>
Status InvalidArgument(const Args&... args) {
  return Status(StatusCode::kInvalidArgument, StrCat(args...));
}
template <typename... Args>
Status OutOfRange(const Args&... args) {
  return Status(StatusCode::kOutOfRange, StrCat(args...));
}
template <typename... Args>
Status FailedPrecondition(const Args&... args) {
  return Status(StatusCode::kFailedPrecondition, StrCat(args...));
}
template <typename... Args>
Status Mismatch(const Args&... args) {
  return Status(StatusCode::kMismatch, StrCat(args...));
}
template <typename... Args>
Status Unavailable(const Args&... args) {
  return Status(StatusCode::kUnavailable, StrCat(args...));
}
template <typename... Args>
Status Internal(const Args&... args) {
  return Status(StatusCode::kInternal, StrCat(args...));
}

// CLI exit status for a status: 0 ok, 1 mismatch, 2 bad input, 3 environment (GPU/CUDA/NCCL) failure.
int ExitCodeFor(const Status& status);

// A value or an error.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const T& value) : value_(value) {}             // NOLINT: implicit by design
  StatusOr(T&& value) : value_(std::move(value)) {}       // NOLINT
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Internal("StatusOr built from an OK status without a value");
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    CheckOk();
    return *value_;
  }
  const T& value() const& {
    CheckOk();
    return *value_;
  }
  T&& value() && {
    CheckOk();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void CheckOk() const {
    if (!status_.ok()) {
      std::cerr << "kvshard: internal: StatusOr::value() on error: " << status_.ToString() << "\n";
      std::abort();
    }
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace kvshard

#define KVSHARD_CONCAT_INNER_(a, b) a##b
#define KVSHARD_CONCAT_(a, b) KVSHARD_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define KVSHARD_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::kvshard::Status kvshard_status_ = (expr);        \
    if (!kvshard_status_.ok()) return kvshard_status_; \
  } while (0)

// `lhs = value of expr` or return its error.
#define KVSHARD_ASSIGN_OR_RETURN(lhs, expr) \
  KVSHARD_ASSIGN_OR_RETURN_IMPL_(KVSHARD_CONCAT_(kvshard_statusor_, __LINE__), lhs, expr)
#define KVSHARD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

// Aborts with file:line when a true invariant (not an input property) is violated.
#define KVSHARD_CHECK(cond)                                                                          \
  do {                                                                                               \
    if (!(cond)) {                                                                                   \
      std::cerr << "kvshard: CHECK failed at " << __FILE__ << ":" << __LINE__ << ": " #cond << "\n"; \
      std::abort();                                                                                  \
    }                                                                                                \
  } while (0)

// CUDA runtime call -> Status with file, line and the CUDA error string (expand only in CUDA code).
#define KVSHARD_CUDA_CHECK(expr)                                                                                      \
  do {                                                                                                                \
    cudaError_t kvshard_cuda_err_ = (expr);                                                                           \
    if (kvshard_cuda_err_ != cudaSuccess) {                                                                           \
      return ::kvshard::Internal(__FILE__, ":", __LINE__, ": CUDA error ", cudaGetErrorName(kvshard_cuda_err_), ": ", \
                                 cudaGetErrorString(kvshard_cuda_err_), " in `" #expr "`");                           \
    }                                                                                                                 \
  } while (0)

// NCCL call -> Status with file, line and the NCCL error string (expand only in NCCL code).
#define KVSHARD_NCCL_CHECK(expr)                                                                                  \
  do {                                                                                                            \
    ncclResult_t kvshard_nccl_res_ = (expr);                                                                      \
    if (kvshard_nccl_res_ != ncclSuccess) {                                                                       \
      return ::kvshard::Internal(__FILE__, ":", __LINE__, ": NCCL error ", ncclGetErrorString(kvshard_nccl_res_), \
                                 " in `" #expr "`");                                                              \
    }                                                                                                             \
  } while (0)

#endif  // KVSHARD_CORE_STATUS_H_
