// Where an operation runs: the host implementation that builds plans, and the backend that moves data.
#ifndef KVSHARD_REPLAY_BACKEND_H_
#define KVSHARD_REPLAY_BACKEND_H_

namespace kvshard::replay {

// Which implementation a command runs: the reference, the GPU backend, or both with a bit-exact diff.
enum class Backend { kRef, kGpu, kDiff };

// Which host implementation builds plans: the reference (the executable spec) or cpu_fast/'s optimized paths
// (the same fields and errors, differential-tested in props/; `--impl fast` where speed matters).
enum class Impl { kRef, kFast };

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_BACKEND_H_
