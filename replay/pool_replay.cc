// Pipeline records on the reference pool and a device data path: plans, owner-filtered writes, staged chunks
// and layer-ahead gathered prefixes, every read compared with the unsharded baseline and across paths.
#include "replay/pool_replay.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>

#include "replay/results.h"
#include "core/pool_json.h"
#include "core/hash.h"
#include "core/spec.h"
#include "cpu_ref/gather_plan.h"

namespace kvshard::replay {
namespace {

// Payload bytes the device thread's queue may hold (a larger step waits for an empty queue).
constexpr size_t kMaxQueuedBytes = size_t{64} << 20;

// set_kv_buffer's answer: each rank's count of owned rows and, when `only` asks, SGLang's _get_write_plan of every
// rank.
FieldAnswer OwnerWritePlan(const std::vector<int64_t>& locs, int64_t n, int64_t ps, const Json* only) {
  FieldAnswer a;
  std::vector<int64_t> counts(n, 0);
  for (int64_t loc : locs) ++counts[(loc % (n * ps)) / ps];
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

// The first difference of two reads (every buffer), as text: "locs[i] (slot S) word w: got X, expected Y" in
// the one-buffer word form, else "... buffer NAME byte j: ..."; empty when equal.
std::string FirstRowDiff(const ref::BufferRows& got, const ref::BufferRows& want, const PoolGeometry& g,
                         const std::vector<int64_t>& locs) {
  for (size_t b = 0; b < want.size(); ++b) {
    if (got[b] == want[b]) continue;
    size_t i = 0;
    while (got[b][i] == want[b][i]) ++i;
    if (!g.explicit_buffers) {  // words, as before buffers existed
      const size_t word = i / 4, w = static_cast<size_t>(g.row_words);
      uint32_t x = 0, y = 0;
      for (int k = 3; k >= 0; --k) {
        x = x << 8 | got[b][word * 4 + k];
        y = y << 8 | want[b][word * 4 + k];
      }
      return StrCat("locs[", word / w, "] (slot ", locs[word / w], ") word ", word % w, ": got ", x, ", expected ", y);
    }
    const size_t width = static_cast<size_t>(g.buffers[b].row_bytes);
    return StrCat("locs[", i / width, "] (slot ", locs[i / width], ") buffer ", g.buffers[b].name, " byte ", i % width,
                  ": got ", static_cast<int>(got[b][i]), ", expected ", static_cast<int>(want[b][i]));
  }
  return "";
}

}  // namespace

namespace {

// PayloadWord's hash of (seed, layer, loc), which every word of a slot's row shares.
uint64_t PayloadSlotHash(uint64_t seed, uint64_t layer_hash, int64_t loc) {
  return Mix64(Mix64(seed ^ layer_hash) ^ static_cast<uint64_t>(loc));
}

uint32_t PayloadWordOf(uint64_t slot_hash, int64_t generation, int64_t word) {
  return static_cast<uint32_t>(
      Mix64(slot_hash ^ (static_cast<uint64_t>(generation) << 20 | static_cast<uint64_t>(word))));
}

}  // namespace

uint32_t PayloadWord(uint64_t seed, int64_t layer, int64_t loc, int64_t generation, int64_t word) {
  return PayloadWordOf(PayloadSlotHash(seed, Mix64(static_cast<uint64_t>(layer)), loc), generation, word);
}

ref::BufferRows PayloadRows(const PoolGeometry& g, int64_t layer, const std::vector<int64_t>& locs,
                            int64_t generation) {
  // A slot's row is computed once, a word at a time (its hash prefix once per slot), then cut into the buffers.
  int64_t slot_bytes = 0;
  for (const ref::PoolBuffer& b : g.buffers) slot_bytes += b.row_bytes;
  const int64_t words = (slot_bytes + 3) / 4;
  const uint64_t layer_hash = Mix64(static_cast<uint64_t>(layer));
  ref::BufferRows rows;
  for (const ref::PoolBuffer& b : g.buffers) rows.emplace_back(locs.size() * static_cast<size_t>(b.row_bytes));
  std::vector<uint8_t> slot_row(static_cast<size_t>(words) * 4);
  for (size_t i = 0; i < locs.size(); ++i) {
    const uint64_t slot_hash = PayloadSlotHash(g.payload_seed, layer_hash, locs[i]);
    for (int64_t w = 0; w < words; ++w) {
      const uint32_t x = PayloadWordOf(slot_hash, generation, w);
      for (int k = 0; k < 4; ++k) slot_row[w * 4 + k] = static_cast<uint8_t>(x >> (8 * k));  // low byte first
    }
    int64_t offset = 0;  // of the buffer in the slot's concatenated row
    for (size_t b = 0; b < g.buffers.size(); ++b) {
      const size_t width = static_cast<size_t>(g.buffers[b].row_bytes);
      std::copy_n(slot_row.data() + offset, width, rows[b].data() + i * width);
      offset += g.buffers[b].row_bytes;
    }
  }
  return rows;
}

const std::vector<std::string>& PoolHeaderKeys() {
  static const auto* keys = new std::vector<std::string>{"max_prefix_tokens", "chunk_tokens", "num_layers",
                                                         "row_words",         "buffers",      "payload_seed"};
  return *keys;
}

namespace {

// The header's "buffers": [{"name": "k", "row_bytes": 1024}, ...].
StatusOr<std::vector<ref::PoolBuffer>> BuffersFromJson(const Json& j) {
  if (!j.is_array()) return InvalidArgument("pool.buffers: must be a list of {\"name\", \"row_bytes\"} objects");
  std::vector<ref::PoolBuffer> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string where = StrCat("pool.buffers[", i, "].");
    if (!j[i].is_object()) return InvalidArgument("pool.buffers[", i, "]: must be an object");
    for (const auto& [key, value] : j[i].items()) {
      if (key != "name" && key != "row_bytes")
        return InvalidArgument(where, QuoteInput(key, '\0'), ": unknown key (name, row_bytes)");
    }
    if (!j[i].contains("name") || !j[i].at("name").is_string()) return InvalidArgument(where, "name: must be a string");
    ref::PoolBuffer b;
    b.name = j[i].at("name").get<std::string>();
    KVSHARD_ASSIGN_OR_RETURN(b.row_bytes, JsonInt(j[i], "row_bytes", where, 1, ref::kMaxPoolRowBytes));
    out.push_back(std::move(b));
  }
  KVSHARD_RETURN_IF_ERROR(ref::ValidatePoolBuffers(out, "pool."));
  return out;
}

}  // namespace

StatusOr<PoolGeometry> PoolGeometryFromJson(const Json& pool, int64_t shard_size, int64_t page_size,
                                            int64_t pages_per_rank) {
  if (!pool.is_object()) return InvalidArgument("pool: must be an object");
  for (const auto& [key, value] : pool.items()) {
    if (std::find(PoolHeaderKeys().begin(), PoolHeaderKeys().end(), key) == PoolHeaderKeys().end()) {
      return InvalidArgument("pool.", QuoteInput(key, '\0'),
                             ": unknown key (max_prefix_tokens, chunk_tokens, num_layers, row_words, "
                             "buffers, payload_seed; shard_size, page_size and pages_per_rank come from "
                             "\"allocator\")");
    }
  }
  PoolGeometry g;
  g.shard_size = shard_size;
  g.page_size = page_size;
  g.pages_per_rank = pages_per_rank;
  KVSHARD_ASSIGN_OR_RETURN(g.max_prefix_tokens, JsonInt(pool, "max_prefix_tokens", "pool.", 0, kMaxSlot - 1));
  KVSHARD_ASSIGN_OR_RETURN(g.chunk_tokens, JsonInt(pool, "chunk_tokens", "pool.", 0, kMaxSlot - 1));
  KVSHARD_ASSIGN_OR_RETURN(g.num_layers, JsonInt(pool, "num_layers", "pool.", 1, 4096));
  if (pool.contains("buffers")) {
    if (pool.contains("row_words")) {
      return InvalidArgument("pool.row_words: give either row_words (one buffer) or buffers, not both");
    }
    KVSHARD_ASSIGN_OR_RETURN(g.buffers, BuffersFromJson(pool.at("buffers")));
    g.explicit_buffers = true;
  } else {
    KVSHARD_ASSIGN_OR_RETURN(g.row_words, JsonInt(pool, "row_words", "pool.", 1, 4096));
    g.buffers = {{"kv", 4 * g.row_words}};
  }
  int64_t seed = 0;
  if (pool.contains("payload_seed")) {
    KVSHARD_ASSIGN_OR_RETURN(seed, JsonInt(pool, "payload_seed", "pool.", 0, INT64_MAX));
  }
  g.payload_seed = static_cast<uint64_t>(seed);
  return g;
}

StatusOr<std::unique_ptr<PoolReplay>> PoolReplay::Create(const PoolGeometry& g, Backend backend,
                                                         std::unique_ptr<PoolDataPath> device, bool device_thread) {
  std::unique_ptr<PoolReplay> r(new PoolReplay(g, backend));
  const ref::ShardedPoolConfig config{g.shard_size,   g.page_size,  g.pages_per_rank, g.max_prefix_tokens,
                                      g.chunk_tokens, g.num_layers, g.row_words,      g.buffers};
  auto pool = ref::ShardedPool::Create(config);
  if (!pool.ok()) return InvalidArgument("pool.", pool.status().message());
  if (backend != Backend::kGpu) r->pool_.emplace(std::move(*pool));
  auto baseline = ref::UnshardedPool::Create(config);
  if (!baseline.ok()) return InvalidArgument("pool.", baseline.status().message());
  r->baseline_.emplace(std::move(*baseline));
  if (backend != Backend::kRef && device == nullptr) return Internal("pool replay: no device data path");
  r->device_ = std::move(device);
  if (backend != Backend::kRef && device_thread) {
    r->worker_ = std::make_unique<DeviceWorker>(kMaxQueuedBytes);
    PoolReplay* self = r.get();
    r->worker_->Submit(0, [self] {  // the device's set-up, while the host checks the first records
      self->device_error_ = self->device_->Start();
      self->device_started_ = self->device_error_.ok();
      if (!self->device_started_) self->found_.store(true, std::memory_order_release);
    });
  }
  return r;
}

Status PoolReplay::RunDeviceStep(size_t bytes, int64_t host_rows, std::function<Status()> step) {
  if (!worker_) {
    Status s = step();
    if (!s.ok()) rows_compared_ -= host_rows;  // the record failed: its rows were not compared
    return s;
  }
  const int64_t index = steps_++, host_before = rows_compared_ - host_rows;
  worker_->Submit(bytes, [this, index, host_before, host_rows, step = std::move(step)] {
    if (!device_started_) return;  // the replay ends with the Start error at the next settle
    Status s = step();
    if (s.ok()) return;
    // A gpu read counts the ranks it compared before the one that differs, as at its record.
    const int64_t device_rows = device_rows_.load(std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(findings_mu_);
    findings_.push_back({index, std::move(s), host_before + device_rows, host_rows});
    found_.store(true, std::memory_order_release);
  });
  return Status::Ok();
}

std::vector<PoolReplay::DeviceFinding> PoolReplay::SettleDevice() {
  if (!worker_) return {};
  worker_->Settle();
  std::lock_guard<std::mutex> lock(findings_mu_);
  found_.store(false, std::memory_order_relaxed);
  return std::exchange(findings_, {});
}

Status PoolReplay::AwaitDeviceStart() {
  if (!worker_ || start_awaited_) return Status::Ok();
  worker_->Settle();  // the path's Start (and any decode write before the first extend)
  start_awaited_ = true;
  return device_started_ ? Status::Ok() : device_error_;  // the replay stops with it at this record's settle
}

Status PoolReplay::DeviceBegin(const ExtendBatch& batch, const std::vector<int64_t>& chunk, const GatherPlan& plan) {
  if (!pool_) {  // --backend gpu: the plan (the record's answer) came from the device, its installation is left
    const Status s = device_->Install(batch, plan, chunk);
    if (s.ok()) return s;
    return Mismatch("invariant: begin_shard_extend: ", device_->Name(), " failed to install its plan: ", s.message());
  }
  StatusOr<GatherPlan> device_plan = device_->Begin(batch, chunk);
  if (!device_plan.ok()) {
    return Mismatch("diff: begin_shard_extend: the reference accepted the batch, ", device_->Name(),
                    " failed: ", device_plan.status().message());
  }
  if (*device_plan == plan) return Status::Ok();
  const Json want = GatherPlanToJson(plan), got = GatherPlanToJson(*device_plan);
  for (const auto& [key, value] : want.items()) {
    if (got.at(key) != value)
      return Mismatch("diff: ", device_->Name(), " plan field ", key, " differs from the reference");
  }
  return Mismatch("diff: ", device_->Name(), " plan differs from the reference");
}

Status PoolReplay::DeviceWrite(int64_t layer, const std::vector<int64_t>& locs, const ref::BufferRows& rows) {
  if (Status s = device_->Write(layer, locs, rows); !s.ok()) {
    if (!pool_)
      return Mismatch("invariant: set_kv_buffer: ", device_->Name(), " failed to write layer ", layer, ": ",
                      s.message());
    return Mismatch("diff: set_kv_buffer: the reference wrote layer ", layer, ", ", device_->Name(),
                    " failed: ", s.message());
  }
  return Status::Ok();
}

Status PoolReplay::DeviceRead(int64_t layer, const std::vector<int64_t>& locs,
                              const std::vector<ref::BufferRows>& ref_rows, const ref::BufferRows& baseline,
                              bool compare) {
  const Status started = device_->StartRead(layer, locs);
  StatusOr<std::vector<PoolDataPath::RowSpans>> got =
      started.ok() ? device_->FinishReadSpans() : StatusOr<std::vector<PoolDataPath::RowSpans>>(started);
  if (!compare) return Status::Ok();  // the host failed: the record's error is the host's
  const auto count = [this](int64_t rows) {
    if (worker_) {
      device_rows_.fetch_add(rows, std::memory_order_relaxed);
    } else {
      rows_compared_ += rows;
    }
  };
  const auto same = [](const PoolDataPath::RowSpans& rank, const ref::BufferRows& want) {
    if (rank.size() != want.size()) return false;
    for (size_t b = 0; b < rank.size(); ++b) {
      if (!std::equal(rank[b].begin(), rank[b].end(), want[b].begin(), want[b].end())) return false;
    }
    return true;
  };
  const auto first_diff = [&](const PoolDataPath::RowSpans& rank, const ref::BufferRows& want) {
    ref::BufferRows rows;
    for (std::span<const uint8_t> b : rank) rows.emplace_back(b.begin(), b.end());
    return FirstRowDiff(rows, want, geometry_, locs);
  };
  if (!pool_) {  // --backend gpu: each rank's read against the unsharded baseline, as the host checks the reference
    if (!got.ok()) {
      return Mismatch("invariant: get_key_buffer: ", device_->Name(), " failed to read layer ", layer, ": ",
                      got.status().message());
    }
    for (size_t r = 0; r < got->size(); ++r) {
      if (!same((*got)[r], baseline)) {
        return Mismatch("invariant: layer ", layer, " rank ", r,
                        ": the sharded read differs from the unsharded pool at ", first_diff((*got)[r], baseline),
                        " (the prefix gather or the chunk staging of this layer is wrong or stale)");
      }
      count(static_cast<int64_t>(locs.size()));
    }
    return Status::Ok();
  }
  if (!got.ok()) {
    return Mismatch("diff: get_key_buffer: the reference read layer ", layer, ", ", device_->Name(),
                    " failed: ", got.status().message());
  }
  for (size_t r = 0; r < ref_rows.size() && r < got->size(); ++r) {  // every byte of both paths, where they lie
    if (!same((*got)[r], ref_rows[r])) {
      return Mismatch("diff: layer ", layer, " rank ", r, ": ", device_->Name(), " read differs from the reference at ",
                      first_diff((*got)[r], ref_rows[r]));
    }
  }
  count(static_cast<int64_t>(locs.size() * ref_rows.size()));
  return Status::Ok();
}

Status PoolReplay::DeviceEnd() {
  Status s = device_->End();
  if (s.ok() || s.code() == StatusCode::kMismatch) return s;  // the path's own "invariant: ..." as it says it
  if (!pool_) return Mismatch("invariant: end_shard_extend: ", device_->Name(), " failed: ", s.message());
  return Mismatch("diff: end_shard_extend: the reference ended the batch, ", device_->Name(), " failed: ", s.message());
}

StatusOr<Json> PoolReplay::Begin(const Json& rec, const Json* only) {
  (void)only;
  Json batch_json = {{"shard_size", geometry_.shard_size},         {"page_size", geometry_.page_size},
                     {"pages_per_rank", geometry_.pages_per_rank}, {"max_prefix_tokens", geometry_.max_prefix_tokens},
                     {"chunk_tokens", geometry_.chunk_tokens},     {"requests", rec.at("requests")}};
  StatusOr<ExtendBatch> batch = ExtendBatchFromJson(batch_json);
  if (!batch.ok()) return InvalidArgument(batch.status().message());
  // SGLang's begin_shard_extend has no guard: a begin while an extend is in flight re-plans and replaces it (the
  // previous batch's staged chunk and plan are dropped), so a begin without an end is what the next batch does.
  const int64_t ps = geometry_.page_size;
  std::vector<int64_t> chunk, all;
  for (const ExtendRequest& r : batch->requests) {
    for (int64_t pos = 0; pos < r.seq_len && pos / ps < static_cast<int64_t>(r.pages.size()); ++pos) {
      const int64_t loc = r.pages[pos / ps] * ps + pos % ps;
      all.push_back(loc);
      if (pos >= r.prefix_len) chunk.push_back(loc);
    }
  }
  GatherPlan plan;
  if (pool_) {
    KVSHARD_RETURN_IF_ERROR(pool_->BeginShardExtend(batch->requests));
    plan = pool_->plan();
  } else {  // --backend gpu: the device's plan is the answer (its installation is a device step below)
    KVSHARD_RETURN_IF_ERROR(AwaitDeviceStart());
    KVSHARD_ASSIGN_OR_RETURN(plan, device_->Plan(*batch));
  }
  active_ = true;
  ++epoch_;
  out_cache_loc_ = std::move(chunk);
  batch_locs_ = std::move(all);
  page_pos_ = ref::DensePagePos(plan);
  Json j = GatherPlanToJson(plan);
  j["epoch"] = epoch_;
  j["out_cache_loc"] = out_cache_loc_;
  if (device_) {  // diff: the reference's batch stands whatever the device makes of it; gpu: installs the plan
    const size_t bytes = out_cache_loc_.size() * sizeof(int64_t);
    KVSHARD_RETURN_IF_ERROR(
        RunDeviceStep(bytes, 0, [this, batch = std::move(*batch), chunk = out_cache_loc_, plan = std::move(plan)] {
          return DeviceBegin(batch, chunk, plan);
        }));
  }
  return j;
}

StatusOr<FieldAnswer> PoolReplay::Write(const Json& rec, const Json* only) {
  const int64_t layer = rec.at("layer").get<int64_t>();
  std::vector<int64_t> locs = rec.contains("locs") ? rec.at("locs").get<std::vector<int64_t>>() : out_cache_loc_;
  if (!rec.contains("locs") && !active_) return InvalidArgument("locs: needed outside an extend (no out_cache_loc)");
  if (layer < 0 || layer >= geometry_.num_layers) {
    return InvalidArgument("layer: must be in [0, ", geometry_.num_layers, "), got ", layer);
  }
  const int64_t slots = geometry_.shard_size * (geometry_.pages_per_rank + 1) * geometry_.page_size;
  for (size_t i = 0; i < locs.size(); ++i) {
    if (locs[i] < 0 || locs[i] >= slots) {
      return InvalidArgument("locs[", i, "]: must be a slot of the pool, in [0, ", slots, "), got ", locs[i]);
    }
  }
  ++generation_;
  if (device_) {  // what the device path cannot write is the record's error, before anything is written
    KVSHARD_RETURN_IF_ERROR(Annotate(device_->CheckWrite(active_, locs, out_cache_loc_), device_->Name(), ": "));
  }
  ref::BufferRows rows = PayloadRows(geometry_, layer, locs, generation_);
  KVSHARD_RETURN_IF_ERROR(baseline_->WriteBuffers(layer, locs, rows));
  if (pool_) KVSHARD_RETURN_IF_ERROR(pool_->WriteBuffers(layer, locs, rows));
  FieldAnswer a = OwnerWritePlan(locs, geometry_.shard_size, geometry_.page_size, only);
  a.Add("staged", active_);
  a.Add("generation", generation_);
  if (device_) {
    size_t bytes = locs.size() * sizeof(int64_t);
    for (const std::vector<uint8_t>& b : rows) bytes += b.size();
    KVSHARD_RETURN_IF_ERROR(RunDeviceStep(bytes, 0, [this, layer, locs = std::move(locs), rows = std::move(rows)] {
      return DeviceWrite(layer, locs, rows);
    }));
  }
  return a;
}

StatusOr<FieldAnswer> PoolReplay::Read(const Json& rec, const Json* only) {
  (void)only;
  const int64_t layer = rec.at("layer").get<int64_t>();
  if (!active_)
    return FailedPrecondition("get_key_buffer: no sharded extend in flight (begin_shard_extend not called?)");
  if (layer < 0 || layer >= geometry_.num_layers) {
    return InvalidArgument("layer: must be in [0, ", geometry_.num_layers, "), got ", layer);
  }
  std::vector<int64_t> locs = rec.contains("locs") ? rec.at("locs").get<std::vector<int64_t>>() : batch_locs_;
  const int64_t ps = geometry_.page_size, trash = page_pos_.empty() ? 0 : page_pos_.back();
  std::vector<int64_t> scratch_rows(locs.size());
  for (size_t i = 0; i < locs.size(); ++i) {
    const int64_t page = locs[i] < 0 ? -1 : locs[i] / ps;
    if (page < 0 || page >= static_cast<int64_t>(page_pos_.size()) || page_pos_[page] == trash) {
      return InvalidArgument("locs[", i, "]: slot ", locs[i],
                             " is not a slot of the extend batch (translate would "
                             "read the trash page)");
    }
    scratch_rows[i] = page_pos_[page] * ps + locs[i] % ps;
  }
  StatusOr<ref::BufferRows> want = baseline_->ReadBuffers(layer, locs);
  StatusOr<std::vector<ref::BufferRows>> checked = std::vector<ref::BufferRows>();
  if (pool_) {
    checked = want.ok() ? pool_->ReadBuffers(layer, locs) : StatusOr<std::vector<ref::BufferRows>>(want.status());
  }
  if (!want.ok() || !checked.ok()) {
    if (device_) {  // the device reads too, to stay in step; the record's error is the host's
      KVSHARD_RETURN_IF_ERROR(
          RunDeviceStep(0, 0, [this, layer, locs] { return DeviceRead(layer, locs, {}, {}, false); }));
    }
    return !want.ok() ? want.status() : checked.status();
  }
  Status invariant = Status::Ok();
  const int64_t host_before = rows_compared_;
  for (size_t r = 0; r < checked->size(); ++r) {
    if ((*checked)[r] != *want) {
      const std::string what = FirstRowDiff((*checked)[r], *want, geometry_, locs);
      invariant =
          Mismatch("invariant: layer ", layer, " rank ", r, ": the sharded read differs from the unsharded pool at ",
                   what, " (the prefix gather or the chunk staging of this layer is wrong or stale)");
      break;
    }
    rows_compared_ += static_cast<int64_t>(locs.size());
  }
  if (device_) {  // diff: every byte of both paths (a difference is the record's first); gpu: the device's read
    size_t bytes = locs.size() * sizeof(int64_t);
    for (const ref::BufferRows& rank : *checked) {
      for (const std::vector<uint8_t>& b : rank) bytes += b.size();
    }
    if (!pool_) {
      for (const std::vector<uint8_t>& b : *want) bytes += b.size();
    }
    KVSHARD_RETURN_IF_ERROR(RunDeviceStep(bytes, rows_compared_ - host_before,
                                          [this, layer, locs = std::move(locs), ref_rows = std::move(*checked),
                                           baseline = pool_ ? ref::BufferRows() : std::move(*want)] {
                                            return DeviceRead(layer, locs, ref_rows, baseline, true);
                                          }));
  }
  KVSHARD_RETURN_IF_ERROR(invariant);
  FieldAnswer a;
  a.Add("slot", layer % 2);
  a.Add("scratch_rows", std::move(scratch_rows));
  return a;
}

StatusOr<Json> PoolReplay::End() {
  if (!active_) return FailedPrecondition("end_shard_extend: no sharded extend in flight");
  if (pool_) pool_->EndShardExtend();
  active_ = false;
  out_cache_loc_.clear();
  batch_locs_.clear();
  if (device_) KVSHARD_RETURN_IF_ERROR(RunDeviceStep(0, 0, [this] { return DeviceEnd(); }));
  return Json{{"op", "end_shard_extend"}};
}

}  // namespace kvshard::replay
