// The rows `kvshard replay` writes with set_kv_buffer (core/payload.h's words), made on the device, and reads
// compared with them there: replay's GPU data path then moves only slots and generations across the bus, and a
// difference is the only thing that comes back. Host-safe launch API.
#ifndef KVSHARD_GPU_PAYLOAD_ROWS_H_
#define KVSHARD_GPU_PAYLOAD_ROWS_H_

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "gpu/stream.h"

namespace kvshard::gpu {

// The most buffers a payload row is cut into (cpu_ref's kMaxPoolBuffers).
inline constexpr int kMaxPayloadBuffers = 16;

// Which payload, and how n slots' rows lie in a block: every buffer's n rows in turn ([buffer 0's n rows | buffer
// 1's | ...], row i of buffer b at byte offset(b) * n + i * widths[b], offset(b) the widths before b), the layout of
// replay's staged writes and of each rank's gathered reads.
struct PayloadLayout {
  uint64_t seed = 0;
  int64_t layer = 0;
  std::vector<int64_t> widths;  // row bytes of each buffer, in order
  // Where a check finds each slot's generation: null, its `generations` list (one per loc); else this table of the
  // layer's every slot (device memory, table_slots entries: replay's last write of each, LaunchMarkGenerations's), loc
  // locs[i]'s entry (0, never written, for a loc outside it), and the check's `generations` is not read.
  const uint32_t* generation_table = nullptr;
  int64_t table_slots = 0;
};

// Checks a layout and a row count (1..kMaxPayloadBuffers buffers of 1..16384 bytes, n >= 0).
Status PayloadCanImplement(const PayloadLayout& layout, int64_t n);

// MakePayloadKernel: one block of the payload rows of (layout.layer, locs[i], generation) for i < n at `out`.
Status LaunchMakePayloadRows(void* out, const int64_t* locs, int64_t n, int64_t generation, const PayloadLayout& layout,
                             cudaStream_t stream);

// CheckPayloadKernel: compares `ranks` blocks (rank r's at rows + r * n * sum(widths)) with the payload of
// (layout.layer, locs[i], generations[i]), generation 0 being zero bytes, and lowers *first (device memory, set to
// UINT64_MAX before) to the key of every differing byte: PayloadKey below, so the least key is the first difference
// by rank, then buffer, then byte.
// With `publish`, the kernel's last block also copies the final key to publish->key and, where it is not UINT64_MAX,
// the row of that buffer that holds the byte (as read) to publish->row (the widest buffer's bytes): a read checked
// now and looked at after later reads reused `rows` (replay's deferred checks). publish->blocks_done (device memory,
// 0 before) counts the finished blocks. A check of no rows launches nothing and sets publish->key to UINT64_MAX.
// With count_in (device memory), the last block also copies *count_in, as it is once every block is done, to
// *count_out: a counter as of the check's end (replay's batch end reads the skipped-rows count there, with no copy
// of its own). Not copied by a check of no rows.
// With `generation`, the last block also writes there the generation the differing row was checked against (left
// as it was where nothing differs): what the row should have been, as of the check.
struct PayloadCheckOut {
  unsigned* blocks_done = nullptr;
  unsigned long long* key = nullptr;
  uint8_t* row = nullptr;
  const int64_t* count_in = nullptr;
  int64_t* count_out = nullptr;
  uint32_t* generation = nullptr;
};
Status LaunchCheckPayloadRows(const void* rows, int ranks, const int64_t* locs, const uint32_t* generations, int64_t n,
                              const PayloadLayout& layout, unsigned long long* first, cudaStream_t stream,
                              const PayloadCheckOut* publish = nullptr);

// MarkGenerationsKernel: table[locs[i]] = generation for i < n (a write's slots in a layer's generation table, see
// PayloadLayout); a loc outside [0, table_slots) is skipped.
Status LaunchMarkGenerations(uint32_t* table, int64_t table_slots, const int64_t* locs, int64_t n, uint32_t generation,
                             cudaStream_t stream);

// The most (rank, buffer) scratch tensors one LaunchCheckPayloadSlots reads, and the most ranks.
inline constexpr int kMaxCheckedSlots = 64;
inline constexpr int kMaxCheckedRanks = 32;

// One rank's scratch as LaunchCheckPayloadSlots reads it: each buffer's slot tensor (device memory, rows of that
// buffer's width) and the rank's page_pos table (device memory).
struct PayloadSlots {
  std::vector<const void*> buffers;
  const int32_t* page_pos = nullptr;
};
// CheckPayloadSlotsKernel: LaunchCheckPayloadRows of the block LaunchTranslateGatherRanks would gather (rank r's
// row i of buffer b = ranks[r].buffers[b] row translate(locs[i]), SGLang's page_pos[loc / ps] * ps + loc % ps), read
// where the rows are, in one launch and without the gathered copy: the same keys, the same published key and row. A
// row whose translation is negative or past slot_rows differs at every byte (its published row is zero bytes).
// At most kMaxCheckedRanks ranks and kMaxCheckedSlots (rank, buffer) tensors.
Status LaunchCheckPayloadSlots(const std::vector<PayloadSlots>& ranks, int64_t slot_rows, int64_t n_page_pos,
                               int64_t page_size, const int64_t* locs, const uint32_t* generations, int64_t n,
                               const PayloadLayout& layout, unsigned long long* first, cudaStream_t stream,
                               const PayloadCheckOut* publish = nullptr);

// A key of LaunchCheckPayloadRows: (rank * buffers + buffer) << 40 | byte (in that buffer's rows of the block).
struct PayloadKey {
  int64_t rank = 0, buffer = 0, byte = 0;
};
PayloadKey DecodePayloadKey(unsigned long long key, int64_t buffers);

}  // namespace kvshard::gpu

#endif  // KVSHARD_GPU_PAYLOAD_ROWS_H_
