// Shared CLI plumbing: flag parsing with Boost.Program_options, error lines and exit codes.
// Every error leaves as one stderr line "kvshard: error: <field>: <what>" and exit status 2.
#ifndef KVSHARD_CLI_CLI_UTIL_H_
#define KVSHARD_CLI_CLI_UTIL_H_

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "core/json.h"
#include "core/status.h"

namespace kvshard::cli {

namespace po = boost::program_options;

// Prints "kvshard: error: <message>" (or "kvshard: mismatch: ..." for kMismatch) and returns the exit code.
int Fail(const Status& status);

// Parses `args` against `desc`; unknown flags, missing values and bad types become InvalidArgument.
// Sets *help when --help was given (then prints usage for `command` and the caller exits 0).
StatusOr<po::variables_map> ParseFlags(const std::string& command, const std::string& synopsis,
                                       const po::options_description& desc, const std::vector<std::string>& args,
                                       bool* help);

// Reads a flag that must be present (the message names --flag).
StatusOr<std::string> RequiredString(const po::variables_map& vm, const std::string& flag);
// Reads an integer flag given as text (strict parsing, names --flag).
StatusOr<int64_t> IntFlag(const po::variables_map& vm, const std::string& flag);
// Reads a comma-separated integer list flag (names --flag[i]).
StatusOr<std::vector<int64_t>> IntListFlag(const po::variables_map& vm, const std::string& flag);

// Rewrites a model-level error "shard_size: ..." into flag spelling "--shard-size: ...".
Status FlagError(const Status& status);

// GPU-vs-reference comparison of one integer field: Mismatch "field: N of M entries differ; first at index i:
// gpu X vs reference Y" (or OK when equal).
Status DiffLists(const std::string& field, const std::vector<int64_t>& got, const std::vector<int64_t>& want);

// Writes JSON (2-space indented) to stdout.
void PrintJson(const Json& j);

// Which implementation a command runs: the reference, the GPU backend, or both with a bit-exact diff.
enum class Backend { kRef, kGpu, kDiff };
// Parses --backend (ref|gpu|diff); gpu/diff fail with a clear line when GPU support was not built.
StatusOr<Backend> BackendFlag(const po::variables_map& vm);
// True when this binary was built with the CUDA backend.
bool GpuBuilt();

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_CLI_UTIL_H_
