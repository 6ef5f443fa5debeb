// The GPU data path of trace replay (`kvshard replay --backend gpu|diff`): the sharded pool's plans, owner-
// filtered writes, chunk staging, layer-ahead gathers and translated reads run on CUDA, with the N ranks
// emulated on one GPU or, given one GPU per rank, an NCCL group. Built only with the CUDA backend.
#ifndef KVSHARD_REPLAY_GPU_POOL_PATH_H_
#define KVSHARD_REPLAY_GPU_POOL_PATH_H_

#include <memory>

#include "replay/pool_replay.h"
#include "core/status.h"

namespace kvshard::replay {

// A device data path for `geometry`: `gpus` <= 1 emulates the N ranks on device 0; gpus == N drives devices
// 0..N-1 through one NCCL communicator. Unavailable without enough devices.
StatusOr<std::unique_ptr<PoolDataPath>> CreateGpuPoolPath(const PoolGeometry& geometry, int gpus);
// Prepares the process for the paths it will make, before its first CUDA call and while it runs one thread: ranks
// emulated on one device (`gpus` <= 1) use two streams (the ranks' compute stream and the planner's), so the driver
// is asked for two hardware queues a context (gpu::PreferHardwareQueues), which halves the context's set-up and
// shortens its teardown at exit; an NCCL group keeps the driver's default. `replays` paths at once (replay --jobs)
// ask for two queues each, up to the driver's default of eight (streams beyond the queues share them).
void PrepareGpuPoolPaths(int gpus, int replays = 1);
// The same path not yet started: no CUDA call until its Start (which `replay --backend diff` runs on its device
// thread, so the device's set-up overlaps the first records); only `gpus` is checked here.
StatusOr<std::unique_ptr<PoolDataPath>> MakeGpuPoolPath(const PoolGeometry& geometry, int gpus);

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_GPU_POOL_PATH_H_
