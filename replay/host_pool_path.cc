// HostPoolPath: each PoolDataPath call is the ShardedPool call of the same name; a read is done at StartRead.
#include "replay/host_pool_path.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cpu_ref/gather_plan.h"
#include "cpu_ref/sharded_pool.h"

namespace kvshard::replay {
namespace {

class HostPoolPath : public PoolDataPath {
 public:
  HostPoolPath(ref::ShardedPool pool, const PoolGeometry& g, bool makes_rows)
      : pool_(std::move(pool)), geometry_(g), makes_rows_(makes_rows) {}

  bool MakesRows() const override { return makes_rows_; }

  Status WriteMade(int64_t layer, const std::vector<int64_t>& locs, int64_t generation) override {
    return pool_.WriteBuffers(layer, locs, PayloadRows(geometry_, layer, locs, generation));
  }

  StatusOr<std::optional<RowDifference>> ReadChecked(int64_t layer, const std::vector<int64_t>& locs,
                                                     const std::vector<uint32_t>& generations) override {
    KVSHARD_ASSIGN_OR_RETURN(std::vector<ref::BufferRows> rows, pool_.ReadBuffers(layer, locs));
    return FirstPayloadDifference(geometry_, layer, locs, generations, rows);
  }

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
  PoolGeometry geometry_;
  bool makes_rows_ = false;
  ref::GatherPlanner planner_;  // Plan's, apart from the pool's
  StatusOr<std::vector<ref::BufferRows>> read_ = std::vector<ref::BufferRows>();
};

}  // namespace

std::optional<PoolDataPath::RowDifference> FirstPayloadDifference(const PoolGeometry& g, int64_t layer,
                                                                  const std::vector<int64_t>& locs,
                                                                  const std::vector<uint32_t>& generations,
                                                                  const std::vector<ref::BufferRows>& rows) {
  const ref::BufferRows want =
      PayloadRowsOf(g, layer, locs, [&](size_t i) { return static_cast<int64_t>(generations[i]); });
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t b = 0; b < want.size() && b < rows[r].size(); ++b) {
      const std::vector<uint8_t>& got = rows[r][b];
      if (got == want[b]) continue;
      size_t i = 0;
      while (i < got.size() && i < want[b].size() && got[i] == want[b][i]) ++i;
      const size_t width = static_cast<size_t>(g.buffers[b].row_bytes), at = i / width * width;
      PoolDataPath::RowDifference d;
      d.rank = static_cast<int64_t>(r);
      d.buffer = static_cast<int64_t>(b);
      d.byte = static_cast<int64_t>(i);
      d.got_row.assign(got.begin() + static_cast<std::ptrdiff_t>(at),
                       got.begin() + static_cast<std::ptrdiff_t>(std::min(at + width, got.size())));
      return d;
    }
  }
  return std::nullopt;
}

StatusOr<std::unique_ptr<PoolDataPath>> CreateHostPoolPath(const PoolGeometry& g, bool makes_rows) {
  const ref::ShardedPoolConfig config{g.shard_size,   g.page_size,  g.pages_per_rank, g.max_prefix_tokens,
                                      g.chunk_tokens, g.num_layers, g.row_words,      g.buffers};
  KVSHARD_ASSIGN_OR_RETURN(ref::ShardedPool pool, ref::ShardedPool::Create(config));
  return std::unique_ptr<PoolDataPath>(new HostPoolPath(std::move(pool), g, makes_rows));
}

}  // namespace kvshard::replay
