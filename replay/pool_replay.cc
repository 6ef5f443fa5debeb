// Pipeline records on the reference pool and a device data path: plans, owner-filtered writes, staged chunks
// and layer-ahead gathered prefixes, every read compared with the unsharded baseline and across paths (the device's
// steps themselves: pool_replay_device.cc; the pool's header and payload rows: pool_rows.cc).
#include "replay/pool_replay.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "replay/read_diff_text.h"
#include "replay/results.h"
#include "cpu_ref/gather_plan.h"

namespace kvshard::replay {
namespace {

// Payload bytes the device thread's queue may hold (a larger step waits for an empty queue).
constexpr size_t kMaxQueuedBytes = size_t{64} << 20;

// set_kv_buffer's answer: each rank's count of owned rows (a run's slots share a page, so its owner) and, when `only`
// asks, SGLang's _get_write_plan of every rank.
FieldAnswer OwnerWritePlan(const std::vector<int64_t>& locs, const std::vector<SlotRun>& runs, int64_t n, int64_t ps,
                           const Json* only) {
  FieldAnswer a;
  std::vector<int64_t> counts(n, 0);
  for (const SlotRun& run : runs) counts[(run.first % (n * ps)) / ps] += run.len;
  a.Add("owned_counts", std::move(counts));
  if (only == nullptr || only->contains("ranks")) {
    std::vector<Json> ranks(n);
    for (int64_t r = 0; r < n; ++r) ranks[r] = Json{{"owned_idx", Json::array()}, {"local_rows", Json::array()}};
    for (size_t i = 0; i < locs.size(); ++i) {
      const int64_t owner = (locs[i] % (n * ps)) / ps;
      ranks[owner]["owned_idx"].push_back(static_cast<int64_t>(i));
      ranks[owner]["local_rows"].push_back((locs[i] / (n * ps)) * ps + locs[i] % ps);
    }
    a.Add("ranks", Json(ranks));
  }
  return a;
}

}  // namespace

StatusOr<std::unique_ptr<PoolReplay>> PoolReplay::Create(const PoolGeometry& g, Backend backend,
                                                         std::unique_ptr<PoolDataPath> device, bool device_thread) {
  std::unique_ptr<PoolReplay> r(new PoolReplay(g, backend));
  const ref::ShardedPoolConfig config{g.shard_size,   g.page_size,  g.pages_per_rank, g.max_prefix_tokens,
                                      g.chunk_tokens, g.num_layers, g.row_words,      g.buffers};
  if (backend != Backend::kGpu) {
    StatusOr<ref::ShardedPool> pool = ref::ShardedPool::Create(config);
    if (!pool.ok()) return InvalidArgument("pool.", pool.status().message());
    StatusOr<ref::UnshardedPool> baseline = ref::UnshardedPool::Create(config);
    if (!baseline.ok()) return InvalidArgument("pool.", baseline.status().message());
    r->pool_.emplace(std::move(*pool));
    r->baseline_.emplace(std::move(*baseline));
  } else {  // neither pool (the device holds the sharded one, last_write_ stands for the baseline): their errors only
    if (Status s = ref::ShardedPool::CanCreate(config); !s.ok()) return InvalidArgument("pool.", s.message());
    if (Status s = ref::UnshardedPool::CanCreate(config); !s.ok()) return InvalidArgument("pool.", s.message());
  }
  // The baseline's rows are PayloadRows of each slot's last write: that generation is all a read needs, for gpu and
  // for diff's device check.
  if (backend == Backend::kGpu || (backend == Backend::kDiff && device != nullptr && device->MakesRows())) {
    const size_t entries = static_cast<size_t>(g.num_layers * r->Slots());
    r->last_write_.reset(static_cast<uint32_t*>(std::calloc(std::max<size_t>(entries, 1), sizeof(uint32_t))));
    if (r->last_write_ == nullptr) {
      return Internal("pool replay: cannot allocate ", entries * sizeof(uint32_t),
                      " bytes for the last write of every slot (pool.num_layers x the allocator's slots)");
    }
  }
  if (backend != Backend::kRef && device == nullptr) return Internal("pool replay: no device data path");
  r->device_ = std::move(device);
  if (backend != Backend::kRef && device_thread) {
    r->plan_worker_ = std::make_unique<DeviceWorker>(kMaxQueuedBytes);
    r->worker_ = std::make_unique<DeviceWorker>(kMaxQueuedBytes);
    PoolReplay* self = r.get();
    r->worker_->Submit(0, [self] {  // the device's set-up, while the host checks the first records
      const auto start = std::chrono::steady_clock::now();
      self->device_error_ = self->device_->Start();
      self->setup_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      self->start_times_ = self->device_->start_times();
      self->device_started_ = self->device_error_.ok();
      if (!self->device_started_) self->found_.store(true, std::memory_order_release);
    });
  }
  return r;
}

int64_t PoolReplay::Slots() const {
  return geometry_.shard_size * (geometry_.pages_per_rank + 1) * geometry_.page_size;
}

void PoolReplay::MarkWritten(int64_t layer, const std::vector<int64_t>& locs, int64_t generation) {
  if (device_->KeepsGenerations()) return;  // the path's own table, where its rows are
  uint32_t* layer_writes = last_write_.get() + layer * Slots();
  for (const int64_t loc : locs) layer_writes[loc] = static_cast<uint32_t>(generation);  // checked slots
}

std::vector<uint32_t> PoolReplay::LastWrites(int64_t layer, const std::vector<int64_t>& locs) {
  std::vector<uint32_t> generations;
  if (device_->KeepsGenerations()) return generations;  // the check reads the path's own table
  const uint32_t* layer_writes = last_write_.get() + layer * Slots();
  if (!spare_lists_.empty()) {  // an answered check's list
    generations = std::move(spare_lists_.back());
    spare_lists_.pop_back();
  }
  generations.clear();  // written once each, not zeroed first
  generations.reserve(locs.size());
  for (const int64_t loc : locs) generations.push_back(layer_writes[loc]);
  return generations;
}

StatusOr<FieldAnswer> PoolReplay::Begin(const std::vector<ExtendRequest>& requests, const Json* only) {
  // The batch of the header's geometry and the record's requests, as ExtendBatchFromJson would read it.
  ExtendBatch batch{geometry_.shard_size,        geometry_.page_size,    geometry_.pages_per_rank,
                    geometry_.max_prefix_tokens, geometry_.chunk_tokens, requests};
  if (Status s = ValidateExtendBatch(batch); !s.ok()) return InvalidArgument(s.message());
  // SGLang's begin_shard_extend has no guard: a begin while an extend is in flight re-plans and replaces it (the
  // previous batch's staged chunk and plan are dropped), so a begin without an end is what the next batch does.
  const int64_t ps = geometry_.page_size;
  size_t all_size = 0, chunk_size = 0;  // sized first: the batch's lists are long, and filled in place
  for (const ExtendRequest& r : batch.requests) {
    const int64_t end = std::min(static_cast<int64_t>(r.pages.size()) * ps, r.seq_len);
    all_size += static_cast<size_t>(std::max<int64_t>(0, end));
    chunk_size += static_cast<size_t>(std::max<int64_t>(0, end - std::max<int64_t>(0, r.prefix_len)));
  }
  std::vector<int64_t> all(all_size), chunk(chunk_size);
  int64_t* to_all = all.data();
  int64_t* to_chunk = chunk.data();
  for (const ExtendRequest& r : batch.requests) {  // positions [0, seq_len) page by page, as far as the pages go
    for (size_t p = 0; p < r.pages.size() && static_cast<int64_t>(p) * ps < r.seq_len; ++p) {
      const int64_t first = static_cast<int64_t>(p) * ps, last = std::min(first + ps, r.seq_len);
      const int64_t to_loc = r.pages[p] * ps - first;  // position pos is slot to_loc + pos
      for (int64_t pos = first; pos < last; ++pos) *to_all++ = to_loc + pos;
      for (int64_t pos = std::max(first, r.prefix_len); pos < last; ++pos) *to_chunk++ = to_loc + pos;
    }
  }
  // The host's plan answers the record: the reference pool's (ref, diff), or the host planner's (gpu; cpu_fast,
  // the reference's plans and errors bit for bit). The device's plan is checked against it by a device step.
  GatherPlan plan;
  Status planned = Status::Ok();
  if (pool_) {
    planned = pool_->BeginShardExtend(batch.requests);
    if (planned.ok()) plan = pool_->plan();
  } else {
    planned = host_planner_.Build(batch, &plan);
  }
  if (!planned.ok()) {
    if (device_) {  // the device must refuse the batch with the same error (the record's error is the host's)
      KVSHARD_RETURN_IF_ERROR(RunDeviceStep(
          0, 0,
          [this, check = std::make_shared<const PlanCheck>(PlanCheck{std::move(batch), planned})] {
            return StartPlanCheck(check);
          },
          StepKind::kDefers));  // counts no rows
    }
    return planned;
  }
  active_ = true;
  ++epoch_;
  out_cache_loc_ = std::make_shared<const std::vector<int64_t>>(std::move(chunk));
  batch_locs_ = std::make_shared<const std::vector<int64_t>>(std::move(all));
  page_pos_.Update(plan);
  FieldAnswer a = GatherPlanFields(plan, only);  // GatherPlanToJson's fields, then the extend's
  a.Add("epoch", epoch_);
  a.Add("out_cache_loc", *out_cache_loc_);
  if (device_) {  // the host's batch stands whatever the device makes of it
    const size_t bytes = out_cache_loc_->size() * sizeof(int64_t);
    KVSHARD_RETURN_IF_ERROR(RunDeviceStep(
        bytes, 0,
        [this, check = std::make_shared<const PlanCheck>(PlanCheck{std::move(batch), std::move(plan)}),
         chunk = out_cache_loc_] { return DeviceBegin(check, *chunk); },
        StepKind::kDefers));  // counts no rows: the checks of the batches before may stay pending
  }
  return a;
}

StatusOr<FieldAnswer> PoolReplay::Write(const Json& rec, SharedLocs record_locs, const Json* only) {
  const int64_t layer = rec.at("layer").get<int64_t>();
  if (record_locs == nullptr && !active_) return InvalidArgument("locs: needed outside an extend (no out_cache_loc)");
  const bool chunk_list = record_locs == nullptr;
  const SharedLocs held = chunk_list ? out_cache_loc_ : std::move(record_locs);
  const std::vector<int64_t>& locs = *held;
  if (layer < 0 || layer >= geometry_.num_layers) {
    return InvalidArgument("layer: must be in [0, ", geometry_.num_layers, "), got ", layer);
  }
  const int64_t slots = Slots();
  // The batch's chunk list was split and checked by the batch's first write that used it: its runs stay.
  EpochRuns* cached = chunk_list ? &chunk_runs_ : nullptr;
  std::vector<SlotRun>& runs = cached != nullptr ? cached->runs : runs_;
  if (cached == nullptr || cached->epoch != epoch_) {
    if (const int64_t bad = SlotRuns(locs, geometry_.page_size, slots, &runs); bad >= 0) {
      return InvalidArgument("locs[", bad, "]: must be a slot of the pool, in [0, ", slots, "), got ", locs[bad]);
    }
    if (cached != nullptr) cached->epoch = epoch_;
  }
  if (last_write_ != nullptr && generation_ >= int64_t{UINT32_MAX}) {
    return OutOfRange("set_kv_buffer: more than ", UINT32_MAX,
                      " writes (--backend gpu|diff keep a slot's last write in 32 bits)");
  }
  ++generation_;
  if (device_) {  // what the device path cannot write is the record's error, before anything is written
    if (Status s = device_->CheckWrite(active_, locs, *out_cache_loc_); !s.ok()) {
      return Annotate(s, device_->Name(), ": ");  // the path's name built only for an error
    }
  }
  ref::BufferRows rows;  // the host's rows (none under gpu: the last write of each slot is what a read is checked by)
  if (baseline_) {
    rows = PayloadRows(geometry_, layer, locs, generation_);
    KVSHARD_RETURN_IF_ERROR(baseline_->WriteBuffers(layer, locs, rows));
    if (pool_) KVSHARD_RETURN_IF_ERROR(pool_->WriteBuffers(layer, locs, rows));
  }
  FieldAnswer a = OwnerWritePlan(locs, runs, geometry_.shard_size, geometry_.page_size, only);
  a.Add("staged", active_);
  a.Add("generation", generation_);
  if (device_) {  // the rows go along only to a path that does not make them
    if (device_->MakesRows() || !baseline_) rows.clear();
    size_t bytes = chunk_list ? 0 : locs.size() * sizeof(int64_t);  // the batch's list: its begin step counted it
    for (const std::vector<uint8_t>& b : rows) bytes += b.size();
    KVSHARD_RETURN_IF_ERROR(RunDeviceStep(
        bytes, 0,
        [this, layer, held, rows = std::move(rows), generation = generation_] {
          if (last_write_ != nullptr) MarkWritten(layer, *held, generation);
          return DeviceWrite(layer, *held, rows, generation);
        },
        StepKind::kDefers));  // counts no rows: checks pending before it may stay pending
  }
  return a;
}

StatusOr<FieldAnswer> PoolReplay::Read(const Json& rec, SharedLocs record_locs, const Json* only) {
  const int64_t layer = rec.at("layer").get<int64_t>();
  if (!active_)
    return FailedPrecondition("get_key_buffer: no sharded extend in flight (begin_shard_extend not called?)");
  if (layer < 0 || layer >= geometry_.num_layers) {
    return InvalidArgument("layer: must be in [0, ", geometry_.num_layers, "), got ", layer);
  }
  const bool batch_list = record_locs == nullptr;
  const SharedLocs held = batch_list ? batch_locs_ : std::move(record_locs);
  const std::vector<int64_t>& locs = *held;
  const std::vector<int64_t>& page_pos = page_pos_.pos();
  const int64_t ps = geometry_.page_size, trash = page_pos.empty() ? 0 : page_pos.back();
  // Every slot is checked; the scratch rows are kept only where the record's expect (or a recorder) asks for them.
  const bool keep_rows = only == nullptr || only->contains("scratch_rows");
  // The batch's own list was checked by the batch's first read that used it (the plan is the batch's): its runs stay.
  EpochRuns* cached = batch_list ? &batch_runs_ : nullptr;
  std::vector<SlotRun>& runs = cached != nullptr ? cached->runs : runs_;
  if (cached == nullptr || cached->epoch != epoch_) {
    // A run's slots share a page, so its check and translation. The runs end before the first slot off the pool's
    // pages, if one is: the first slot of the first run on an unmapped page, else that slot, is the error.
    SlotRuns(locs, ps, static_cast<int64_t>(page_pos.size()) * ps, &runs);
    int64_t at = 0;
    for (const SlotRun& run : runs) {
      if (page_pos[run.first / ps] == trash) break;
      at += run.len;
    }
    if (at < static_cast<int64_t>(locs.size())) {
      return InvalidArgument("locs[", at, "]: slot ", locs[at],
                             " is not a slot of the extend batch (translate would "
                             "read the trash page)");
    }
    if (cached != nullptr) cached->epoch = epoch_;
  }
  std::vector<int64_t> scratch_rows;
  if (keep_rows) {
    scratch_rows.resize(locs.size());  // the runs cover locs in order
    int64_t* to = scratch_rows.data();
    for (const SlotRun& run : runs) {
      const int64_t row = page_pos[run.first / ps] * ps + run.first % ps;
      for (int64_t k = 0; k < run.len; ++k) *to++ = row + k;
    }
  }
  // The bytes a device step of this read holds: its own list, or the batch's, counted by the batch's first read only
  // (the device thread's queue runs in order, so at most the batch it is at holds a list no queued step counts).
  const size_t locs_bytes = batch_list && locs_counted_epoch_ == epoch_ ? 0 : locs.size() * sizeof(int64_t);
  if (batch_list && device_) locs_counted_epoch_ = epoch_;
  if (!baseline_) {  // --backend gpu: the device's read against the last write of each slot, on the device thread
    // Checked where the rows are (on the device thread, waited for with the batch's other checks), or here.
    const bool checked = device_->MakesRows();
    KVSHARD_RETURN_IF_ERROR(RunDeviceStep(
        locs_bytes, 0,
        [this, checked, layer, held] {
          std::vector<uint32_t> generations = LastWrites(layer, *held);
          return checked ? CheckedRead(false, layer, held, std::move(generations)) : GpuRead(layer, *held, generations);
        },
        checked ? StepKind::kDefers : StepKind::kSettles));
    FieldAnswer a;
    a.Add("slot", layer % 2);
    if (keep_rows) a.Add("scratch_rows", std::move(scratch_rows));
    return a;
  }
  StatusOr<ref::BufferRows> want = baseline_->ReadBuffers(layer, locs);
  StatusOr<std::vector<ref::BufferRows>> checked = std::vector<ref::BufferRows>();
  if (pool_) {
    checked = want.ok() ? pool_->ReadBuffers(layer, locs) : StatusOr<std::vector<ref::BufferRows>>(want.status());
  }
  if (!want.ok() || !checked.ok()) {
    if (device_) {  // diff: the device reads too, to stay in step; the record's error is the reference's
      KVSHARD_RETURN_IF_ERROR(
          RunDeviceStep(locs_bytes, 0, [this, layer, held] { return DiffRead(layer, *held, {}, false); }));
    }
    return !want.ok() ? want.status() : checked.status();
  }
  Status invariant = Status::Ok();
  const int64_t host_before = rows_compared_;
  for (size_t r = 0; r < checked->size(); ++r) {
    if ((*checked)[r] != *want) {
      const std::string what = FirstRowDiff((*checked)[r], *want, geometry_, locs);
      invariant = Mismatch(SharedReadDiffers(layer, r, what));
      break;
    }
    rows_compared_ += static_cast<int64_t>(locs.size());
  }
  if (device_ && invariant.ok() && device_->MakesRows()) {
    // diff, the reference's read being the baseline's on every rank: the path checks its read against the payload
    // of each slot's last write (those very bytes) where its rows are, and no row is handed over.
    KVSHARD_RETURN_IF_ERROR(RunDeviceStep(
        locs_bytes, rows_compared_ - host_before,
        [this, layer, held] { return CheckedRead(true, layer, held, LastWrites(layer, *held)); }, StepKind::kDefers));
  } else if (device_) {  // diff: every byte of both paths (a difference is the record's first)
    size_t bytes = locs_bytes;
    for (const ref::BufferRows& rank : *checked) {
      for (const std::vector<uint8_t>& b : rank) bytes += b.size();
    }
    KVSHARD_RETURN_IF_ERROR(RunDeviceStep(
        bytes, rows_compared_ - host_before,
        [this, layer, held, ref_rows = std::move(*checked)] { return DiffRead(layer, *held, ref_rows, true); }));
  }
  KVSHARD_RETURN_IF_ERROR(invariant);
  FieldAnswer a;
  a.Add("slot", layer % 2);
  if (keep_rows) a.Add("scratch_rows", std::move(scratch_rows));
  return a;
}

StatusOr<Json> PoolReplay::End() {
  if (!active_) return FailedPrecondition("end_shard_extend: no sharded extend in flight");
  if (pool_) pool_->EndShardExtend();
  active_ = false;
  out_cache_loc_ = NoLocs();
  batch_locs_ = NoLocs();
  if (device_) {  // an end the path answers as a pending check leaves the checks before it pending too
    KVSHARD_RETURN_IF_ERROR(RunDeviceStep(
        0, 0, [this] { return DeviceEnd(); }, device_->EndsChecked() ? StepKind::kDefers : StepKind::kSettles));
  }
  return Json{{"op", "end_shard_extend"}};
}

}  // namespace kvshard::replay
