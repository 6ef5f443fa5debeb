// kvshard split --mode owners: the page compute-owner plan of a CP batch and, with --out-cache-loc, one rank's
// CP shared-KV direct-write locs (logical and physical), seed 003's build_flat_page_owner_plan and
// get_cp_shared_kv_local_[physical_]out_cache_loc.
#ifndef KVSHARD_CLI_SPLIT_OWNERS_H_
#define KVSHARD_CLI_SPLIT_OWNERS_H_

#include <iosfwd>

#include "cli/flags.h"
#include "core/status.h"

namespace kvshard::cli {

// Declares --out-cache-loc and --extend-num-tokens (used by --mode owners).
void DeclareSplitOwnerFlags(po::options_description& flags);

// Runs --mode owners: a table, or JSON with --json.
Status RunSplitOwners(const Flags& flags, std::ostream& out);

}  // namespace kvshard::cli

#endif  // KVSHARD_CLI_SPLIT_OWNERS_H_
