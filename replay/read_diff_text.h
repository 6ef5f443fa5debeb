// How replay says where a read differs (the reference's and the device thread's checks share the texts).
#ifndef KVSHARD_REPLAY_READ_DIFF_TEXT_H_
#define KVSHARD_REPLAY_READ_DIFF_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "replay/pool_replay.h"
#include "cpu_ref/sharded_pool.h"

namespace kvshard::replay {

// Byte `i` of buffer b's rows where a read differs, as text: "locs[r] (slot S) word w: got X, expected Y" in the
// one-buffer word form, else "locs[r] (slot S) buffer NAME byte j: got X, expected Y"; `got_row` and `want_row`
// are the row (r = i / row_bytes) that holds it.
std::string RowDiffText(const PoolGeometry& g, const std::vector<int64_t>& locs, size_t b, size_t i,
                        std::span<const uint8_t> got_row, std::span<const uint8_t> want_row);

// The first difference of two reads (every buffer), as RowDiffText says it; empty when equal.
std::string FirstRowDiff(const ref::BufferRows& got, const ref::BufferRows& want, const PoolGeometry& g,
                         const std::vector<int64_t>& locs);

// "invariant: layer L rank r: the sharded read differs from the unsharded pool at WHERE (...)".
std::string SharedReadDiffers(int64_t layer, size_t rank, const std::string& where);

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_READ_DIFF_TEXT_H_
