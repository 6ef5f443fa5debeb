// The reference sharded pool as a PoolDataPath: `replay --backend diff`'s machinery (the device thread, the
// comparisons, the deferred reports) driven without a GPU, by the replay benchmark and the device-thread property.
#ifndef KVSHARD_REPLAY_HOST_POOL_PATH_H_
#define KVSHARD_REPLAY_HOST_POOL_PATH_H_

#include <memory>

#include "core/status.h"
#include "replay/pool_data_path.h"
#include "replay/pool_replay.h"

namespace kvshard::replay {

// A data path that runs every call on its own ref::ShardedPool of `geometry` (named "host path").
StatusOr<std::unique_ptr<PoolDataPath>> CreateHostPoolPath(const PoolGeometry& geometry);

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_HOST_POOL_PATH_H_
