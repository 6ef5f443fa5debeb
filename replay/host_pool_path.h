// The reference sharded pool as a PoolDataPath: `replay --backend diff`'s machinery (the device thread, the
// comparisons, the deferred reports) driven without a GPU, by the replay benchmark and the device-thread property.
#ifndef KVSHARD_REPLAY_HOST_POOL_PATH_H_
#define KVSHARD_REPLAY_HOST_POOL_PATH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/status.h"
#include "replay/pool_data_path.h"
#include "replay/pool_replay.h"

namespace kvshard::replay {

// A data path that runs every call on its own ref::ShardedPool of `geometry` (named "host path"). With
// `makes_rows`, it also makes its rows and checks its reads itself (PoolDataPath::MakesRows), on the host, as the
// GPU path does on the device: the properties' stand-in for that contract.
StatusOr<std::unique_ptr<PoolDataPath>> CreateHostPoolPath(const PoolGeometry& geometry, bool makes_rows = false);

// ReadChecked's answer for `rows` ([rank][buffer], as FinishRead gives them) read at `locs` of `layer`: the first
// byte (rank, then buffer, then byte) where they differ from the payload of `generations`, or none.
std::optional<PoolDataPath::RowDifference> FirstPayloadDifference(const PoolGeometry& geometry, int64_t layer,
                                                                  const std::vector<int64_t>& locs,
                                                                  const std::vector<uint32_t>& generations,
                                                                  const std::vector<ref::BufferRows>& rows);

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_HOST_POOL_PATH_H_
