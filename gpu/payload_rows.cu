// Payload rows made and checked on the device: a thread per (row, word of the slot's concatenated row), the word
// computed as the host computes it (core/payload.h) and cut into the buffers byte by byte (one buffer of whole words:
// stored and compared a word at a time). Checked in a gathered block or where the rows are, in each rank's scratch
// slots (CheckPayloadKernel with GatheredRows or RowsInSlots).
#include "gpu/payload_rows.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>

#include "core/payload.h"

namespace kvshard::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kKeyByteBits = 40;

struct Layout {
  uint64_t seed;
  uint64_t layer_hash;
  int buffers;
  int64_t row_sum;                         // bytes of a slot's row, every buffer
  int64_t width[kMaxPayloadBuffers];       // row bytes of buffer b
  int64_t offset[kMaxPayloadBuffers + 1];  // widths before buffer b (offset[buffers] = row_sum)
  const uint32_t* table;                   // PayloadLayout's generation_table (null: a check's generations list)
  int64_t table_slots;
};

Layout ToLayout(const PayloadLayout& p) {
  Layout l{};
  l.seed = p.seed;
  l.layer_hash = Mix64(static_cast<uint64_t>(p.layer));
  l.buffers = static_cast<int>(p.widths.size());
  for (int b = 0; b < l.buffers; ++b) {
    l.width[b] = p.widths[b];
    l.offset[b + 1] = l.offset[b] + p.widths[b];
  }
  l.row_sum = l.offset[l.buffers];
  l.table = p.generation_table;
  l.table_slots = p.table_slots;
  return l;
}

// The generation row i of a check is checked against: its list's entry, or its loc's in the layout's table.
__device__ inline uint32_t GenerationOf(const Layout& l, const uint32_t* generations, const int64_t* locs, int64_t i) {
  if (l.table == nullptr) return generations[i];
  const int64_t loc = locs[i];
  return loc >= 0 && loc < l.table_slots ? l.table[loc] : 0u;
}

// Byte p of a slot's row -> (buffer, byte in its row).
__device__ inline int BufferOf(const Layout& l, int64_t p) {
  int b = 0;
  while (p >= l.offset[b + 1]) ++b;
  return b;
}

__global__ void MakePayloadKernel(uint8_t* out, const int64_t* locs, int64_t n, int64_t generation, Layout l) {
  const int64_t words = (l.row_sum + 3) / 4, work = n * words;
  const bool whole_words = l.buffers == 1 && l.row_sum % 4 == 0;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < work;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t / words, w = t % words;
    const uint32_t x = PayloadWordOf(PayloadSlotHash(l.seed, l.layer_hash, locs[i]), generation, w);
    if (whole_words) {
      reinterpret_cast<uint32_t*>(out + i * l.row_sum)[w] = x;
      continue;
    }
    for (int k = 0; k < 4 && 4 * w + k < l.row_sum; ++k) {
      const int64_t p = 4 * w + k;
      const int b = BufferOf(l, p);
      out[l.offset[b] * n + i * l.width[b] + (p - l.offset[b])] = static_cast<uint8_t>(x >> (8 * k));
    }
  }
}

// The last block of a check (by a ticket after every block's lowering of *first) copies the final key, the
// differing row and its generation (generation_of(row)) to `out` (PayloadCheckOut); row_of(rank, buffer, row) is
// where that row is read (nullptr: not readable, published as zero bytes).
template <typename RowOf, typename GenerationOfRow>
__device__ void PublishKey(const Layout& l, unsigned long long* first, const PayloadCheckOut& out, RowOf row_of,
                           GenerationOfRow generation_of) {
  __shared__ bool last;
  __threadfence();  // this thread's atomicMins are visible to every block before its block takes a ticket
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned blocks = gridDim.x * gridDim.y;
    last = atomicAdd(out.blocks_done, 1u) == blocks - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const unsigned long long key = atomicAdd(first, 0ull);  // every block's lowering is visible to the last
  if (threadIdx.x == 0) *out.key = key;
  if (threadIdx.x == 0 && out.count_in != nullptr) *out.count_out = *out.count_in;
  if (key == ULLONG_MAX) return;
  const int64_t slot = static_cast<int64_t>(key >> kKeyByteBits),
                byte = static_cast<int64_t>(key & ((1ull << kKeyByteBits) - 1));
  const int64_t rank = slot / l.buffers, b = slot % l.buffers, width = l.width[b];
  const uint8_t* row = row_of(rank, b, byte / width);
  for (int64_t k = threadIdx.x; k < width; k += blockDim.x) out.row[k] = row == nullptr ? 0 : row[k];
  if (threadIdx.x == 0 && out.generation != nullptr) *out.generation = generation_of(byte / width);
}

// LaunchCheckPayloadSlots's tensors: slot[rank * buffers + b], page_pos[rank].
struct Slots {
  const uint8_t* slot[kMaxCheckedSlots];
  const int32_t* page_pos[kMaxCheckedRanks];
  int64_t slot_rows, n_page_pos, ps;
};

// Where a check reads row i of (rank, buffer b): in a gathered block (rank r's at rows + r * n * row_sum, every
// buffer's n rows in turn) ...
struct GatheredRows {
  const uint8_t* rows;
  int64_t n;
  __device__ const uint8_t* operator()(const Layout& l, int64_t rank, int64_t b, int64_t i) const {
    return rows + rank * n * l.row_sum + l.offset[b] * n + i * l.width[b];
  }
};

// ... or where it lies, in the rank's scratch slot of buffer b at translate(locs[i]) (nullptr outside the slot).
struct RowsInSlots {
  Slots s;
  const int64_t* locs;
  __device__ const uint8_t* operator()(const Layout& l, int64_t rank, int64_t b, int64_t i) const {
    const int64_t loc = locs[i];
    if (loc < 0 || loc / s.ps >= s.n_page_pos) return nullptr;
    const int64_t row = int64_t{s.page_pos[rank][loc / s.ps]} * s.ps + loc % s.ps;
    if (row < 0 || row >= s.slot_rows) return nullptr;
    return s.slot[rank * l.buffers + b] + row * l.width[b];
  }
};

// A thread per (row, word of the slot's concatenated row) of rank blockIdx.y: the word the payload has, against the
// bytes row_at gives (a row it cannot give differs at every byte), each difference lowering *first to its key.
template <typename RowAt>
__global__ void CheckPayloadKernel(RowAt row_at, const int64_t* locs, const uint32_t* generations, int64_t n, Layout l,
                                   unsigned long long* first, PayloadCheckOut publish) {
  const int64_t words = (l.row_sum + 3) / 4, work = n * words;
  const int rank = static_cast<int>(blockIdx.y);
  const bool whole_words = l.buffers == 1 && l.row_sum % 4 == 0;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < work;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t / words, w = t % words;
    const uint32_t g = GenerationOf(l, generations, locs, i);
    const uint32_t x = g == 0 ? 0u : PayloadWordOf(PayloadSlotHash(l.seed, l.layer_hash, locs[i]), g, w);
    if (whole_words) {
      const uint8_t* row = row_at(l, rank, 0, i);
      const uint32_t got = row == nullptr ? ~x : reinterpret_cast<const uint32_t*>(row)[w];
      if (got == x) continue;
      int k = 0;
      while (((got ^ x) >> (8 * k) & 0xff) == 0) ++k;
      atomicMin(first, static_cast<unsigned long long>(rank) << kKeyByteBits |
                           static_cast<unsigned long long>(i * l.row_sum + 4 * w + k));
      continue;
    }
    for (int k = 0; k < 4 && 4 * w + k < l.row_sum; ++k) {
      const int64_t p = 4 * w + k;
      const int b = BufferOf(l, p);
      const uint8_t* row = row_at(l, rank, b, i);
      if (row != nullptr && row[p - l.offset[b]] == static_cast<uint8_t>(x >> (8 * k))) continue;
      atomicMin(first, static_cast<unsigned long long>(rank * l.buffers + b) << kKeyByteBits |
                           static_cast<unsigned long long>(i * l.width[b] + (p - l.offset[b])));
    }
  }
  if (publish.blocks_done != nullptr) {
    PublishKey(
        l, first, publish, [&](int64_t r, int64_t b, int64_t i) { return row_at(l, r, b, i); },
        [&](int64_t i) { return GenerationOf(l, generations, locs, i); });
  }
}

__global__ void MarkGenerationsKernel(uint32_t* __restrict__ table, int64_t table_slots,
                                      const int64_t* __restrict__ locs, int64_t n, uint32_t generation) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t loc = locs[i];
    if (loc >= 0 && loc < table_slots) table[loc] = generation;
  }
}

// What both checks take: a layout and row count PayloadCanImplement takes, and a whole `publish` (where given).
Status CheckCanImplement(const PayloadLayout& layout, int64_t n, const PayloadCheckOut* publish) {
  KVSHARD_RETURN_IF_ERROR(PayloadCanImplement(layout, n));
  if (publish != nullptr &&
      (publish->key == nullptr || publish->row == nullptr || (n > 0 && publish->blocks_done == nullptr))) {
    return InvalidArgument("publish: key, row and (for rows to check) blocks_done must be given");
  }
  if (publish != nullptr && (publish->count_in == nullptr) != (publish->count_out == nullptr)) {
    return InvalidArgument("publish: count_in and count_out go together");
  }
  return Status::Ok();
}

// A check of no rows: nothing differs (published as UINT64_MAX where asked), nothing launched.
Status PublishNoDifference(const PayloadCheckOut* publish, cudaStream_t stream) {
  if (publish != nullptr) KVSHARD_CUDA_CHECK(cudaMemsetAsync(publish->key, 0xff, sizeof(unsigned long long), stream));
  return Status::Ok();
}

unsigned Blocks(int64_t work) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((work + kThreads - 1) / kThreads, 4096)));
}

}  // namespace

Status PayloadCanImplement(const PayloadLayout& layout, int64_t n) {
  if (layout.widths.empty() || layout.widths.size() > static_cast<size_t>(kMaxPayloadBuffers)) {
    return InvalidArgument("widths: must hold 1 to ", kMaxPayloadBuffers, " buffers, got ", layout.widths.size());
  }
  for (size_t b = 0; b < layout.widths.size(); ++b) {
    if (layout.widths[b] < 1 || layout.widths[b] > 16384) {
      return InvalidArgument("widths[", b, "]: must be in [1, 16384], got ", layout.widths[b]);
    }
  }
  if (n < 0) return InvalidArgument("n: must be >= 0, got ", n);
  int64_t row_sum = 0;
  for (int64_t w : layout.widths) row_sum += w;
  if (n > (int64_t{1} << kKeyByteBits) / row_sum) {
    return OutOfRange("n: ", n, " rows of ", row_sum, " bytes exceed a check key's 2^40 bytes");
  }
  return Status::Ok();
}

Status LaunchMakePayloadRows(void* out, const int64_t* locs, int64_t n, int64_t generation, const PayloadLayout& layout,
                             cudaStream_t stream) {
  KVSHARD_RETURN_IF_ERROR(PayloadCanImplement(layout, n));
  if (n == 0) return Status::Ok();
  const Layout l = ToLayout(layout);
  const int64_t work = n * ((l.row_sum + 3) / 4);
  MakePayloadKernel<<<Blocks(work), kThreads, 0, stream>>>(static_cast<uint8_t*>(out), locs, n, generation, l);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchMarkGenerations(uint32_t* table, int64_t table_slots, const int64_t* locs, int64_t n, uint32_t generation,
                             cudaStream_t stream) {
  if (n < 0 || table_slots < 0) return InvalidArgument("n, table_slots: must be >= 0");
  if (n == 0) return Status::Ok();
  MarkGenerationsKernel<<<Blocks(n), kThreads, 0, stream>>>(table, table_slots, locs, n, generation);
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchCheckPayloadRows(const void* rows, int ranks, const int64_t* locs, const uint32_t* generations, int64_t n,
                              const PayloadLayout& layout, unsigned long long* first, cudaStream_t stream,
                              const PayloadCheckOut* publish) {
  KVSHARD_RETURN_IF_ERROR(CheckCanImplement(layout, n, publish));
  if (ranks < 1 || ranks > 65535) return InvalidArgument("ranks: must be in [1, 65535], got ", ranks);
  if (static_cast<int64_t>(ranks) * static_cast<int64_t>(layout.widths.size()) >= (int64_t{1} << 23)) {
    return OutOfRange("ranks: ", ranks, " ranks of ", layout.widths.size(), " buffers exceed a check key");
  }
  if (n == 0) return PublishNoDifference(publish, stream);
  const Layout l = ToLayout(layout);
  const int64_t work = n * ((l.row_sum + 3) / 4);
  CheckPayloadKernel<<<dim3(Blocks(work), static_cast<unsigned>(ranks)), kThreads, 0, stream>>>(
      GatheredRows{static_cast<const uint8_t*>(rows), n}, locs, generations, n, l, first,
      publish ? *publish : PayloadCheckOut{});
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchCheckPayloadSlots(const std::vector<PayloadSlots>& ranks, int64_t slot_rows, int64_t n_page_pos,
                               int64_t page_size, const int64_t* locs, const uint32_t* generations, int64_t n,
                               const PayloadLayout& layout, unsigned long long* first, cudaStream_t stream,
                               const PayloadCheckOut* publish) {
  KVSHARD_RETURN_IF_ERROR(CheckCanImplement(layout, n, publish));
  const int64_t buffers = static_cast<int64_t>(layout.widths.size());
  if (ranks.empty() || ranks.size() > static_cast<size_t>(kMaxCheckedRanks) ||
      static_cast<int64_t>(ranks.size()) * buffers > kMaxCheckedSlots) {
    return InvalidArgument("ranks: 1 to ", kMaxCheckedRanks, " ranks and at most ", kMaxCheckedSlots,
                           " (rank, buffer) tensors, got ", ranks.size(), " ranks of ", buffers, " buffers");
  }
  if (page_size < 1) return InvalidArgument("page_size: must be >= 1, got ", page_size);
  if (slot_rows < 0 || n_page_pos < 0) return InvalidArgument("slot_rows, n_page_pos: must be >= 0");
  Slots s{};
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (static_cast<int64_t>(ranks[r].buffers.size()) != buffers) {
      return InvalidArgument("ranks[", r, "]: expected ", buffers, " buffers, got ", ranks[r].buffers.size());
    }
    for (int64_t b = 0; b < buffers; ++b) s.slot[r * buffers + b] = static_cast<const uint8_t*>(ranks[r].buffers[b]);
    s.page_pos[r] = ranks[r].page_pos;
  }
  s.slot_rows = slot_rows;
  s.n_page_pos = n_page_pos;
  s.ps = page_size;
  if (n == 0) return PublishNoDifference(publish, stream);
  const Layout l = ToLayout(layout);
  const int64_t work = n * ((l.row_sum + 3) / 4);
  CheckPayloadKernel<<<dim3(Blocks(work), static_cast<unsigned>(ranks.size())), kThreads, 0, stream>>>(
      RowsInSlots{s, locs}, locs, generations, n, l, first, publish ? *publish : PayloadCheckOut{});
  KVSHARD_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

PayloadKey DecodePayloadKey(unsigned long long key, int64_t buffers) {
  const int64_t slot = static_cast<int64_t>(key >> kKeyByteBits);
  return {slot / buffers, slot % buffers, static_cast<int64_t>(key & ((1ull << kKeyByteBits) - 1))};
}

}  // namespace kvshard::gpu
