// CLI plumbing implementation.
#include "cli/cli_util.h"

#include <algorithm>

#include "core/parse.h"
#ifdef KVSHARD_HAVE_CUDA
#include "gpu/device.h"
#endif

namespace kvshard::cli {

int Fail(const Status& status) {
  if (status.code() == StatusCode::kMismatch) {
    std::cerr << "kvshard: mismatch: " << status.message() << "\n";
  } else {
    std::cerr << "kvshard: error: " << status.message() << "\n";
  }
  return ExitCodeFor(status);
}

StatusOr<po::variables_map> ParseFlags(const std::string& command, const std::string& synopsis,
                                       const po::options_description& desc, const std::vector<std::string>& args,
                                       bool* help) {
  po::options_description all(desc);
  all.add_options()("help,h", "show this help and exit");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).style(po::command_line_style::unix_style ^
                                                               po::command_line_style::allow_guessing)
                  .run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return InvalidArgument(command, ": ", e.what());
  }
  *help = vm.count("help") > 0;
  if (*help) {
    std::cout << "usage: kvshard " << command << " " << synopsis << "\n\n" << all << "\n";
  }
  return vm;
}

StatusOr<std::string> RequiredString(const po::variables_map& vm, const std::string& flag) {
  if (!vm.count(flag)) return InvalidArgument("--", flag, ": required");
  return vm[flag].as<std::string>();
}

StatusOr<int64_t> IntFlag(const po::variables_map& vm, const std::string& flag) {
  KVSHARD_ASSIGN_OR_RETURN(std::string text, RequiredString(vm, flag));
  return ParseInt64(text, "--" + flag);
}

StatusOr<std::vector<int64_t>> IntListFlag(const po::variables_map& vm, const std::string& flag) {
  KVSHARD_ASSIGN_OR_RETURN(std::string text, RequiredString(vm, flag));
  return ParseInt64List(text, "--" + flag);
}

Status FlagError(const Status& status) {
  const std::string& m = status.message();
  size_t colon = m.find(':');
  std::string field = m.substr(0, colon);
  size_t bracket = field.find('[');
  std::string name = field.substr(0, bracket);
  for (char& c : name) {
    if (c == '_') c = '-';
  }
  return Status(status.code(), "--" + name + m.substr(bracket == std::string::npos ? colon : bracket));
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

void PrintJson(const Json& j) { std::cout << j.dump(2) << "\n"; }

bool GpuBuilt() {
#ifdef KVSHARD_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

StatusOr<Backend> BackendFlag(const po::variables_map& vm) {
  const std::string b = vm.count("backend") ? vm["backend"].as<std::string>() : "ref";
  Backend backend;
  if (b == "ref") return Backend::kRef;
  if (b == "gpu") {
    backend = Backend::kGpu;
  } else if (b == "diff") {
    backend = Backend::kDiff;
  } else {
    return InvalidArgument("--backend: must be ref, gpu or diff, got '", b, "'");
  }
  if (!GpuBuilt()) {
    return Unavailable("--backend ", b, ": GPU support not built (no CUDA toolkit found at build time)");
  }
#ifdef KVSHARD_HAVE_CUDA
  std::string why;
  if (gpu::VisibleDeviceCount(&why) == 0) return Unavailable("--backend ", b, ": no CUDA device visible (", why, ")");
#endif
  return backend;
}

}  // namespace kvshard::cli
