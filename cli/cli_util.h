// Helpers the commands share: model errors in flag spelling, GPU-vs-reference diffs, --backend and GPU
// availability, JSON and list printing.
#ifndef KVSHARD_CLI_CLI_UTIL_H_
#define KVSHARD_CLI_CLI_UTIL_H_

#include <cstdint>
#include <iosfwd>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/flags.h"
#include "core/json.h"
#include "core/status.h"
#include "replay/backend.h"

namespace kvshard::cli {

// A table cell for the text tables: `out << Col(12) << value` writes value right-aligned in 12 columns, and with one
// space before it when it is wider, so a table of large numbers never runs its columns together (the tables are
// streamed, row by row, so their widths cannot be measured first).
struct Col {
  explicit Col(int columns) : width(columns) {}
  int width;
};
class ColCell {
 public:
  ColCell(std::ostream& out, int width) : out_(out), width_(width) {}
  template <typename T>
  std::ostream& operator<<(const T& value) {
    std::ostringstream text;
    text << value;
    const std::string t = text.str();
    const int pad = width_ - static_cast<int>(t.size());
    return out_ << std::string(pad > 0 ? pad : 1, ' ') << t;
  }

 private:
  std::ostream& out_;
  int width_;
};
inline ColCell operator<<(std::ostream& out, Col col) { return ColCell(out, col.width); }

// Rewrites a model-level error "shard_size: ..." into flag spelling "--shard-size: ..."; `renames` maps model
// fields whose flag is named differently ({"rank", "shard-rank"}).
Status FlagError(const Status& status, const std::vector<std::pair<std::string, std::string>>& renames = {});

// (model field, flag name) pairs: how a command's flags spell the fields its engine's errors name.
using FlagNames = std::vector<std::pair<std::string, std::string>>;

// An engine error in flag spelling: every whole-word occurrence of a field of `names` (word characters: letters,
// digits, '_'; a name may be a phrase such as "radix = false") becomes "--<flag>"; a field that is one plain word
// ("records") only where the message starts. Engines speak field names
// ("cache_tokens: must be >= 0"); the command that set the field from a flag says "--cache-tokens: ...".
std::string SpellFlags(const std::string& message, const FlagNames& names);
Status SpellFlags(const Status& status, const FlagNames& names);

// A CP model error for the CLI: SGLang fail-fast messages ("[CP_SHARED_KV_FAIL_FAST][tag] ...") unchanged,
// field errors ("cp_size: ...") in flag spelling ("--cp-size: ...").
Status CpModelError(const Status& status);

// --prefix-lens of the CP commands, or `n` zeros when absent.
std::vector<int64_t> PrefixLens(const Flags& flags, size_t n);

// GPU-vs-reference comparison of one integer field: Mismatch "field: N of M entries differ; first at index i:
// gpu X vs reference Y" (or OK when equal).
Status DiffLists(const std::string& field, const std::vector<int64_t>& got, const std::vector<int64_t>& want);

// Writes JSON (2-space indented) and a newline to `out`.
void PrintJson(const Json& j, std::ostream& out);

// `value` as it appears at nesting depth `depth` of PrintJson's output (dump(2), lines after the first
// indented by 2 * depth more), so a large result can be written a field or an element at a time,
// byte-identical to printing the whole tree.
void WriteJsonAtDepth(const Json& value, int depth, std::ostream& out);

// Writes an object field by field as PrintJson would print the whole object: Field() for each, then End().
class JsonObjectWriter {
 public:
  explicit JsonObjectWriter(std::ostream& out) : out_(out) {}
  // Writes `"key": value` (value at depth 1).
  void Field(const std::string& key, const Json& value);
  // Writes `"key": [` ... `]` with `emit(element)` called per element (elements at depth 2), `size` of them.
  template <typename Each>
  void ArrayField(const std::string& key, size_t size, Each each) {
    Key(key);
    if (size == 0) {
      out_ << "[]";
      return;
    }
    out_ << "[\n";
    for (size_t i = 0; i < size; ++i) {
      out_ << (i ? ",\n    " : "    ");
      WriteJsonAtDepth(each(i), 2, out_);
    }
    out_ << "\n  ]";
  }
  // Closes the object ("{}" when no field was written) and ends the line.
  void End();

 private:
  void Key(const std::string& key);
  std::ostream& out_;
  bool first_ = true;
};

// "[a,b,c]".
std::string ListText(const std::vector<int64_t>& v);

// The backend and plan-builder choices of the commands (replay/backend.h).
using replay::Backend;
using replay::Impl;

// --impl: ref (default) or fast, for the plan-building commands.
po::typed_value<std::string>* ImplValue();
// The --impl flag's value.
Impl ImplFlag(const Flags& flags);
// The --backend flag's value type: ref|gpu|diff, default ref.
po::typed_value<std::string>* BackendValue();
// The --backend choice; gpu/diff fail (exit 3) with a clear line when GPU support is not built or, with
// `check_device`, when no device is visible (the caller that passes false runs GpuAvailable itself, say on a
// thread of its own while it reads its input). With `check_device` gpu/diff first ask the driver for two hardware
// queues a context (gpu::PreferHardwareQueues: its callers run their kernels on the default stream); call it while
// the command runs one thread.
StatusOr<Backend> BackendFlag(const Flags& flags, bool check_device = true);

// True when this binary was built with the CUDA backend.
bool GpuBuilt();
// "built (sm_90)" or "not built (no CUDA toolkit at build time)".
std::string GpuBuildText();
// OK when the GPU backend is built and a device is visible; else Unavailable "<what>: <why>".
Status GpuAvailable(const std::string& what);

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_CLI_UTIL_H_
