// HostPoolPath: each PoolDataPath call is the ShardedPool call of the same name; a read is done at StartRead.
#include "replay/host_pool_path.h"

#include <string>
#include <utility>
#include <vector>

#include "cpu_ref/gather_plan.h"
#include "cpu_ref/sharded_pool.h"

namespace kvshard::replay {
namespace {

class HostPoolPath : public PoolDataPath {
 public:
  explicit HostPoolPath(ref::ShardedPool pool) : pool_(std::move(pool)) {}

  std::string Name() const override { return "host path"; }

  // A planner of its own: Plan touches nothing the other calls use (it may run on another thread).
  StatusOr<GatherPlan> Plan(const ExtendBatch& batch) override {
    GatherPlan plan;
    KVSHARD_RETURN_IF_ERROR(planner_.Build(batch, &plan));
    return plan;
  }

  // The pool installs the plan its own planner builds for `batch` (the same reference code as Plan's).
  Status Install(const ExtendBatch& batch, const GatherPlan&, const std::vector<int64_t>&) override {
    return pool_.BeginShardExtend(batch.requests);
  }

  Status Write(int64_t layer, const std::vector<int64_t>& locs, const ref::BufferRows& rows) override {
    return pool_.WriteBuffers(layer, locs, rows);
  }

  Status StartRead(int64_t layer, const std::vector<int64_t>& locs) override {
    read_ = pool_.ReadBuffers(layer, locs);
    return read_.status();
  }

  StatusOr<std::vector<ref::BufferRows>> FinishRead() override { return std::move(read_); }

  Status End() override {
    pool_.EndShardExtend();
    return Status::Ok();
  }

 private:
  ref::ShardedPool pool_;
  ref::GatherPlanner planner_;  // Plan's, apart from the pool's
  StatusOr<std::vector<ref::BufferRows>> read_ = std::vector<ref::BufferRows>();
};

}  // namespace

StatusOr<std::unique_ptr<PoolDataPath>> CreateHostPoolPath(const PoolGeometry& g) {
  const ref::ShardedPoolConfig config{g.shard_size,   g.page_size,  g.pages_per_rank, g.max_prefix_tokens,
                                      g.chunk_tokens, g.num_layers, g.row_words,      g.buffers};
  KVSHARD_ASSIGN_OR_RETURN(ref::ShardedPool pool, ref::ShardedPool::Create(config));
  return std::unique_ptr<PoolDataPath>(new HostPoolPath(std::move(pool)));
}

}  // namespace kvshard::replay
