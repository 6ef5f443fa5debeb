// Helpers the commands share.
#include "cli/cli_util.h"

#include <algorithm>
#include <cctype>
#include <ostream>
#include <sstream>

#ifdef KVSHARD_HAVE_CUDA
#include "gpu/device.h"
#endif

namespace kvshard::cli {

Status FlagError(const Status& status, const std::vector<std::pair<std::string, std::string>>& renames) {
  const std::string& m = status.message();
  const size_t colon = m.find(':');
  if (colon == std::string::npos) return status;
  const std::string field = m.substr(0, colon);
  const size_t bracket = field.find('[');
  std::string name = field.substr(0, bracket);
  for (const auto& [model_field, flag] : renames) {
    if (name == model_field) name = flag;
  }
  std::replace(name.begin(), name.end(), '_', '-');
  return Status(status.code(), "--" + name + m.substr(bracket == std::string::npos ? colon : bracket));
}

std::string SpellFlags(const std::string& message, const FlagNames& names) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  for (size_t i = 0; i < message.size();) {
    const FlagNames::value_type* hit = nullptr;
    if (i == 0 || !word(message[i - 1])) {
      for (const auto& entry : names) {
        const std::string& field = entry.first;
        const size_t end = i + field.size();
        // A plain word ("records") is a field only where a message starts; identifiers (with '_', '.' or ' ') anywhere.
        const bool identifier = field.find_first_of("_. ") != std::string::npos;
        if ((identifier || i == 0) && message.compare(i, field.size(), field) == 0 &&
            (end == message.size() || !word(message[end])) && (!hit || field.size() > hit->first.size())) {
          hit = &entry;
        }
      }
    }
    if (hit) {
      out += "--" + hit->second;
      i += hit->first.size();
    } else {
      out += message[i++];
    }
  }
  return out;
}

Status SpellFlags(const Status& status, const FlagNames& names) {
  if (status.ok()) return status;
  return Status(status.code(), SpellFlags(status.message(), names));
}

Status CpModelError(const Status& status) {
  if (status.ok() || status.message().empty() || status.message()[0] == '[') return status;
  return FlagError(status);
}

std::vector<int64_t> PrefixLens(const Flags& flags, size_t n) {
  return flags.Has("prefix-lens") ? flags.IntList("prefix-lens") : std::vector<int64_t>(n, 0);
}

Status DiffLists(const std::string& field, const std::vector<int64_t>& got, const std::vector<int64_t>& want) {
  const size_t n = std::max(got.size(), want.size());
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < n; ++i) {
    if ((i >= got.size() || i >= want.size() || got[i] != want[i]) && wrong++ == 0) first = i;
  }
  if (wrong == 0) return Status::Ok();
  return Mismatch(field, ": ", wrong, " of ", n, " entries differ; first at index ", first, ": gpu ",
                  first < got.size() ? std::to_string(got[first]) : "<missing>", " vs reference ",
                  first < want.size() ? std::to_string(want[first]) : "<missing>");
}

void PrintJson(const Json& j, std::ostream& out) { out << j.dump(2) << "\n"; }

void WriteJsonAtDepth(const Json& value, int depth, std::ostream& out) {
  const std::string text = value.dump(2);
  const std::string indent(static_cast<size_t>(2 * depth), ' ');
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    out.write(text.data() + start, static_cast<std::streamsize>(nl + 1 - start));
    out << indent;
  }
  out.write(text.data() + start, static_cast<std::streamsize>(text.size() - start));
}

void JsonObjectWriter::Key(const std::string& key) {
  out_ << (first_ ? "{\n  " : ",\n  ") << Json(key).dump() << ": ";
  first_ = false;
}

void JsonObjectWriter::Field(const std::string& key, const Json& value) {
  Key(key);
  WriteJsonAtDepth(value, 1, out_);
}

void JsonObjectWriter::End() { out_ << (first_ ? "{}\n" : "\n}\n"); }

std::string ListText(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << "]";
  return os.str();
}

po::typed_value<std::string>* ImplValue() { return Choice({"ref", "fast"})->default_value("ref"); }

Impl ImplFlag(const Flags& flags) { return flags.String("impl") == "fast" ? Impl::kFast : Impl::kRef; }

po::typed_value<std::string>* BackendValue() { return Choice({"ref", "gpu", "diff"})->default_value("ref"); }

StatusOr<Backend> BackendFlag(const Flags& flags, bool check_device) {
  const std::string& b = flags.String("backend");
  if (b == "ref") return Backend::kRef;
#ifdef KVSHARD_HAVE_CUDA
  // The commands that check here run their kernels on the default stream: two hardware queues a context are plenty,
  // and with them the context is made and torn down faster (docs/gpu.md). Before the device check, the first CUDA call.
  if (check_device) gpu::PreferHardwareQueues(2);
#endif
  if (check_device || !GpuBuilt()) KVSHARD_RETURN_IF_ERROR(GpuAvailable("--backend " + b));  // not built: no CUDA call
  return b == "gpu" ? Backend::kGpu : Backend::kDiff;
}

bool GpuBuilt() {
#ifdef KVSHARD_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::string GpuBuildText() { return GpuBuilt() ? "built (sm_90)" : "not built (no CUDA toolkit at build time)"; }

Status GpuAvailable(const std::string& what) {
  if (!GpuBuilt()) return Unavailable(what, ": GPU support not built (no CUDA toolkit found at build time)");
#ifdef KVSHARD_HAVE_CUDA
  std::string why;
  if (gpu::VisibleDeviceCount(&why) == 0) return Unavailable(what, ": no CUDA device visible (", why, ")");
#endif
  return Status::Ok();
}

}  // namespace kvshard::cli
