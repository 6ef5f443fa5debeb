// The GPU data path's reads: translated and gathered on the device for every local rank, then copied back
// (StartRead / FinishRead), or checked where they are against each slot's last write, only the first difference's
// key (and row) coming back, the answers of several checked reads taken with one wait (StartReadChecked /
// TakeChecked).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/kv_ops.h"
#include "gpu/nvtx.h"
#include "gpu/payload_rows.h"
#include "replay/gpu_pool_path_impl.h"

namespace kvshard::replay::gpu_path {

StatusOr<std::optional<PoolDataPath::RowDifference>> GpuPoolPath::ReadChecked(
    int64_t layer, const std::vector<int64_t>& locs, const std::vector<uint32_t>& generations) {
  if (pending_checks_ > 0) return FailedPrecondition("gpu: ReadChecked while checked reads are pending");
  KVSHARD_RETURN_IF_ERROR(StartReadChecked(layer, locs, generations));
  std::vector<CheckAnswer> answers = TakeChecked();
  if (answers.size() != 1) return Internal("gpu: expected one checked read, got ", answers.size());
  return std::move(answers[0]);
}

Status GpuPoolPath::StartReadChecked(int64_t layer, const std::vector<int64_t>& locs,
                                     const std::vector<uint32_t>& generations) {
  KVSHARD_NVTX_RANGE("kvshard.pool.read_checked");
  if (!shared_device_) return FailedPrecondition("gpu: reads are checked on the device for emulated ranks only");
  const bool kept = KeepsGenerations();  // the checks read the device's table, not a list
  if (!kept && generations.size() != locs.size()) return InvalidArgument("generations: expected one per loc");
  if (pending_checks_ >= kMaxPendingChecks) {
    return FailedPrecondition("gpu: more than ", kMaxPendingChecks, " checked reads pending");
  }
  if (reading_) KVSHARD_RETURN_IF_ERROR(FinishReadSpans().status());
  KVSHARD_ASSIGN_OR_RETURN(auto slots, gather_->AcquireBuffersForRead(layer));
  const int64_t m = static_cast<int64_t>(locs.size());
  KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&checks_, CheckRowAt(kMaxPendingChecks)));
  const int slot = pending_checks_;
  end_check_[slot] = false;
  snap_check_ = -1;
  gpu::PayloadCheckOut out{nullptr, checks_.as<unsigned long long>() + slot, checks_.as<uint8_t>() + CheckRowAt(slot)};
  out.generation = reinterpret_cast<uint32_t*>(checks_.as<uint8_t>() + GenerationAt(slot));
  if (m == 0) {  // nothing to read: the check of no rows publishes "no difference"
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
    KVSHARD_RETURN_IF_ERROR(gpu::LaunchCheckPayloadRows(nullptr, 1, nullptr, nullptr, 0, Layout(layer), nullptr,
                                                        gather_->compute_stream(0), &out));
    ++pending_checks_;
    return Status::Ok();
  }
  if (gather_->one_stream()) {  // the check's last block copies the skipped-rows counter for an end right after it
    out.count_in = gather_->bad_counter();
    out.count_out = reinterpret_cast<int64_t*>(checks_.as<uint8_t>() + CountAt(slot));
  }
  const size_t key_at = m * sizeof(int64_t), done_at = key_at + sizeof(uint64_t), gens_at = done_at + 8;
  const size_t upload = gens_at + (kept ? 0 : m * sizeof(uint32_t));
  // A slot grows to the largest upload any slot has taken: each of them is pinned (a cudaHostAlloc) about once.
  check_upload_peak_ = std::max(check_upload_peak_, upload);
  gpu::PinnedBuffer& up = check_uploads_[slot];
  KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&up, up.bytes() < upload ? check_upload_peak_ : upload));
  auto* host = static_cast<char*>(up.data());
  std::memcpy(host, locs.data(), key_at);
  const uint64_t none = UINT64_MAX, zero = 0;
  std::memcpy(host + key_at, &none, sizeof(none));
  std::memcpy(host + done_at, &zero, sizeof(zero));
  if (!kept) std::memcpy(host + gens_at, generations.data(), m * sizeof(uint32_t));
  KVSHARD_RETURN_IF_ERROR(StartSharedRead(slots, m, m * RowBytes(), layer, up, upload, &out));
  if (out.count_out != nullptr) snap_check_ = slot;
  ++pending_checks_;
  return Status::Ok();
}

std::vector<PoolDataPath::CheckAnswer> GpuPoolPath::TakeChecked() {
  KVSHARD_NVTX_RANGE("kvshard.pool.take_checked");
  const int n = std::exchange(pending_checks_, 0);
  snap_check_ = -1;
  if (n == 0) return {};
  if (Status s = DownloadKeys(n); !s.ok()) return std::vector<CheckAnswer>(static_cast<size_t>(n), s);
  std::vector<CheckAnswer> answers;
  if (gather_->one_stream()) MarkQuiet();  // the wait was for everything issued
  for (int i = 0; i < n; ++i) {
    uint64_t key = 0;
    std::memcpy(&key, static_cast<const char*>(host_keys_.data()) + i * sizeof(uint64_t), sizeof(key));
    if (end_check_[i]) {  // an end: its key (or its checked read's counter copy) is the rows skipped so far
      if (end_from_[i] >= 0) {
        std::memcpy(&key, static_cast<const char*>(host_keys_.data()) + CountAt(end_from_[i]), sizeof(key));
      }
      if (key == 0) {
        answers.emplace_back(std::optional<RowDifference>());
      } else {
        answers.emplace_back(Mismatch("invariant: ", key, " rows skipped on the GPU for out-of-range indices"));
      }
      continue;
    }
    if (key == UINT64_MAX) {
      answers.emplace_back(std::optional<RowDifference>());
      continue;
    }
    const gpu::PayloadKey at = gpu::DecodePayloadKey(key, static_cast<int64_t>(g_.buffers.size()));
    RowDifference d{at.rank, at.buffer, at.byte, {}};
    d.got_row.resize(static_cast<size_t>(g_.buffers[at.buffer].row_bytes));
    Status copied = gpu::CopyToHost(d.got_row.data(), checks_.as<uint8_t>() + CheckRowAt(i), d.got_row.size());
    if (copied.ok()) {
      copied = gpu::CopyToHost(&d.generation, checks_.as<uint8_t>() + GenerationAt(i), sizeof(d.generation));
    }
    if (copied.ok()) {
      answers.emplace_back(std::optional<RowDifference>(std::move(d)));
    } else {
      answers.emplace_back(copied);
    }
  }
  return answers;
}

Status GpuPoolPath::StartEndChecked() {
  KVSHARD_NVTX_RANGE("kvshard.pool.end_checked");
  if (!shared_device_ || !gather_->one_stream()) {
    return FailedPrecondition("gpu: ends are checked on the device for emulated ranks only");
  }
  if (pending_checks_ >= kMaxPendingChecks) {
    return FailedPrecondition("gpu: more than ", kMaxPendingChecks, " checks pending");
  }
  // Right after a checked read (no device work since, none left for EndExtend to issue) the end's count is the
  // counter that read's check copied as it finished; else the counter is copied now, after the batch's work.
  const int from = gather_->gathers_pending() ? -1 : snap_check_;
  snap_check_ = -1;
  KVSHARD_RETURN_IF_ERROR(gather_->EndExtend());
  active_ = false;
  if (reading_) KVSHARD_RETURN_IF_ERROR(FinishReadSpans().status());
  KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&checks_, CheckRowAt(kMaxPendingChecks)));
  const int slot = pending_checks_;
  if (from < 0) KVSHARD_RETURN_IF_ERROR(gather_->CopyBadRows(checks_.as<int64_t>() + slot));
  end_from_[slot] = from;
  end_check_[slot] = true;
  ++pending_checks_;
  in_flight_ = true;
  return Status::Ok();
}

Status GpuPoolPath::StartRead(int64_t layer, const std::vector<int64_t>& locs) {
  KVSHARD_NVTX_RANGE("kvshard.pool.start_read");
  snap_check_ = -1;
  KVSHARD_ASSIGN_OR_RETURN(auto slots, BeginRead(layer));
  const int64_t m = static_cast<int64_t>(locs.size());
  KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&host_locs_, locs.size() * sizeof(int64_t)));
  if (m > 0) std::memcpy(host_locs_.data(), locs.data(), locs.size() * sizeof(int64_t));
  const int ranks = static_cast<int>(comm_->local_ranks().size());
  host_out_.resize(ranks);
  const size_t rank_bytes = m * RowBytes();  // one rank's gathered rows of every buffer
  if (shared_device_ && m > 0) {
    return StartSharedRead(slots, m, rank_bytes, -1, host_locs_, m * sizeof(int64_t), nullptr);
  }
  // Ranks on devices of their own (or nothing to read): each reads its own rows on its stream.
  for (int i = 0; i < ranks; ++i) {
    KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(i)));
    const cudaStream_t s = gather_->compute_stream(i);
    Staging& st = staging_[i];
    KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&st.locs, 2 * m * sizeof(int64_t)));  // the locs, then their rows
    KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&st.out, rank_bytes));
    KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&host_out_[i], rank_bytes));
    if (m == 0) continue;
    int64_t* d_rows = st.locs.as<int64_t>() + m;
    KVSHARD_CUDA_CHECK(
        cudaMemcpyAsync(st.locs.data(), host_locs_.data(), m * sizeof(int64_t), cudaMemcpyHostToDevice, s));
    KVSHARD_RETURN_IF_ERROR(gpu::LaunchTranslate(d_rows, st.locs.as<int64_t>(), m, gather_->page_pos(i),
                                                 gather_->shape().n_page_pos, g_.page_size, s));
    size_t offset = 0;
    for (size_t b = 0; b < g_.buffers.size(); ++b) {
      const int64_t width = g_.buffers[b].row_bytes;
      KVSHARD_RETURN_IF_ERROR(gpu::LaunchGatherRows(st.out.as<uint8_t>() + offset, slots[i][b],
                                                    gather_->shape().scratch_rows(), d_rows, m, width, nullptr, s));
      offset += static_cast<size_t>(m * width);
    }
    KVSHARD_CUDA_CHECK(cudaMemcpyAsync(host_out_[i].data(), st.out.data(), rank_bytes, cudaMemcpyDeviceToHost, s));
  }
  KVSHARD_RETURN_IF_ERROR(RecordStaging(&read_done_));
  reading_ = true;
  read_rows_ = m;
  return Status::Ok();
}

StatusOr<std::vector<ref::BufferRows>> GpuPoolPath::FinishRead() {
  KVSHARD_ASSIGN_OR_RETURN(std::vector<RowSpans> spans, FinishReadSpans());
  std::vector<ref::BufferRows> out;
  for (const RowSpans& rank : spans) {
    out.emplace_back();
    for (std::span<const uint8_t> b : rank) out.back().emplace_back(b.begin(), b.end());
  }
  return out;
}

StatusOr<std::vector<PoolDataPath::RowSpans>> GpuPoolPath::FinishReadSpans() {
  KVSHARD_NVTX_RANGE("kvshard.pool.finish_read");
  if (!reading_) return FailedPrecondition("gpu: FinishRead without a StartRead");
  reading_ = false;
  std::vector<RowSpans> out;
  const int ranks = static_cast<int>(comm_->local_ranks().size());
  const size_t rank_bytes = read_rows_ * RowBytes();
  for (int i = 0; i < ranks; ++i) {
    // The compute stream waits on the gathered layer: the group's deadline. Shared: rank 0's copy waited for all.
    if (i == 0 || !shared_device_) {
      KVSHARD_RETURN_IF_ERROR(comm_->SynchronizeRank(i, gather_->compute_stream(i)));
    }
    out.emplace_back();
    const auto* host = shared_device_ ? static_cast<const uint8_t*>(host_out_[0].data()) + i * rank_bytes
                                      : static_cast<const uint8_t*>(host_out_[i].data());
    for (const ref::PoolBuffer& b : g_.buffers) {
      const size_t bytes = static_cast<size_t>(read_rows_ * b.row_bytes);
      out.back().emplace_back(host, bytes);
      host += bytes;
    }
  }
  return out;
}

Status GpuPoolPath::StartSharedRead(const std::vector<std::vector<void*>>& slots, int64_t m, size_t rank_bytes,
                                    int64_t check_layer, const gpu::PinnedBuffer& from, size_t upload,
                                    gpu::PayloadCheckOut* publish) {
  const int ranks = static_cast<int>(comm_->local_ranks().size());
  KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
  const cudaStream_t s0 = gather_->compute_stream(0);
  KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&staging_[0].locs, upload));
  const int64_t* d_locs = staging_[0].locs.as<int64_t>();
  KVSHARD_CUDA_CHECK(cudaMemcpyAsync(staging_[0].locs.data(), from.data(), upload, cudaMemcpyHostToDevice, s0));
  // A check's key, block count and generations follow the locs in its upload.
  auto* key = reinterpret_cast<unsigned long long*>(staging_[0].locs.as<uint8_t>() + m * sizeof(int64_t));
  const auto* gens = reinterpret_cast<const uint32_t*>(key + 2);
  if (publish != nullptr) publish->blocks_done = reinterpret_cast<unsigned*>(key + 1);
  // A check on one stream reads the rows where they are, in each rank's scratch slots: one launch, no gathered copy.
  const bool in_place = publish != nullptr && gather_->one_stream() && ranks <= gpu::kMaxCheckedRanks &&
                        ranks * static_cast<int64_t>(g_.buffers.size()) <= gpu::kMaxCheckedSlots;
  if (in_place) {
    std::vector<gpu::PayloadSlots> at(ranks);
    for (int i = 0; i < ranks; ++i) {
      at[i].buffers.assign(slots[i].begin(), slots[i].end());
      at[i].page_pos = gather_->page_pos(i);
    }
    KVSHARD_RETURN_IF_ERROR(gpu::LaunchCheckPayloadSlots(at, gather_->shape().scratch_rows(),
                                                         gather_->shape().n_page_pos, g_.page_size, d_locs, gens, m,
                                                         Layout(check_layer), key, s0, publish));
    in_flight_ = true;  // its upload is its own until TakeChecked (or Quiesce) has waited for it
    return Status::Ok();
  }
  KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&staging_[0].out, rank_bytes * ranks));
  for (int i = 1; i < StreamCount(); ++i) {
    KVSHARD_CUDA_CHECK(cudaEventRecord(order_[i], gather_->compute_stream(i)));
    KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(s0, order_[i], 0));
  }
  size_t offset = 0;  // buffer b of rank i lands at i * rank_bytes + (the widths of the buffers before b) * m
  for (size_t b = 0; b < g_.buffers.size(); ++b) {
    const int64_t width = g_.buffers[b].row_bytes;
    std::vector<gpu::TranslateGatherJob> jobs;
    for (int i = 0; i < ranks; ++i) {
      jobs.push_back({staging_[0].out.as<uint8_t>() + i * rank_bytes + offset, slots[i][b],
                      gather_->shape().scratch_rows(), gather_->page_pos(i), gather_->shape().n_page_pos});
    }
    for (size_t first = 0; first < jobs.size(); first += gpu::kMaxRankJobs) {
      const size_t last = std::min(jobs.size(), first + gpu::kMaxRankJobs);
      KVSHARD_RETURN_IF_ERROR(gpu::LaunchTranslateGatherRanks({jobs.begin() + first, jobs.begin() + last}, d_locs, m,
                                                              g_.page_size, width, s0));
    }
    offset += static_cast<size_t>(m * width);
  }
  if (publish != nullptr) {
    KVSHARD_RETURN_IF_ERROR(gpu::LaunchCheckPayloadRows(staging_[0].out.data(), ranks, d_locs, gens, m,
                                                        Layout(check_layer), key, s0, publish));
  } else {
    KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&host_out_[0], rank_bytes * ranks));
    KVSHARD_CUDA_CHECK(
        cudaMemcpyAsync(host_out_[0].data(), staging_[0].out.data(), rank_bytes * ranks, cudaMemcpyDeviceToHost, s0));
  }
  if (StreamCount() > 1) KVSHARD_CUDA_CHECK(cudaEventRecord(order_[0], s0));
  for (int i = 1; i < StreamCount(); ++i) {
    KVSHARD_CUDA_CHECK(cudaStreamWaitEvent(gather_->compute_stream(i), order_[0], 0));
  }
  if (publish != nullptr) {  // its upload is its own until TakeChecked (or Quiesce) has waited for it
    in_flight_ = true;
    return Status::Ok();
  }
  KVSHARD_RETURN_IF_ERROR(RecordStaging(&read_done_));
  reading_ = true;
  read_rows_ = m;
  return Status::Ok();
}

StatusOr<std::vector<std::vector<void*>>> GpuPoolPath::BeginRead(int64_t layer) {
  if (reading_) KVSHARD_RETURN_IF_ERROR(FinishReadSpans().status());
  KVSHARD_ASSIGN_OR_RETURN(auto slots, gather_->AcquireBuffersForRead(layer));
  KVSHARD_RETURN_IF_ERROR(WaitForStaging(&read_done_));
  return slots;
}

size_t GpuPoolPath::CheckRowAt(int i) const {
  size_t widest = 0;
  for (const ref::PoolBuffer& b : g_.buffers) widest = std::max(widest, static_cast<size_t>(b.row_bytes));
  return 3 * kMaxPendingChecks * sizeof(uint64_t) + static_cast<size_t>(i) * widest;
}

Status GpuPoolPath::DownloadKeys(int n) {
  KVSHARD_CUDA_CHECK(cudaSetDevice(comm_->device(0)));
  KVSHARD_RETURN_IF_ERROR(gpu::Reserve(&host_keys_, 2 * kMaxPendingChecks * sizeof(uint64_t)));
  const cudaStream_t s0 = gather_->compute_stream(0);
  KVSHARD_CUDA_CHECK(cudaMemcpyAsync(host_keys_.data(), checks_.data(), CountAt(n), cudaMemcpyDeviceToHost, s0));
  return comm_->SynchronizeRank(0, s0);  // the group's deadline
}

}  // namespace kvshard::replay::gpu_path
