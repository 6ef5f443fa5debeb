// The words a replay writes with set_kv_buffer: word `word` of the row of slot `loc` of `layer` in write
// generation `generation`, from the trace's payload seed (docs/trace-format.md, "pool"). One definition for the
// host (replay/pool_replay.h's PayloadRows) and the device (gpu/payload_rows.h), which must make the same bytes.
#ifndef KVSHARD_CORE_PAYLOAD_H_
#define KVSHARD_CORE_PAYLOAD_H_

#include <cstdint>

#include "core/hash.h"

namespace kvshard {

// The hash of (seed, layer, loc) that every word of a slot's row shares; `layer_hash` is Mix64(layer).
KVSHARD_HOST_DEVICE inline uint64_t PayloadSlotHash(uint64_t seed, uint64_t layer_hash, int64_t loc) {
  return Mix64(Mix64(seed ^ layer_hash) ^ static_cast<uint64_t>(loc));
}

// Word `word` of a slot's row in `generation`, from the slot's hash.
KVSHARD_HOST_DEVICE inline uint32_t PayloadWordOf(uint64_t slot_hash, int64_t generation, int64_t word) {
  return static_cast<uint32_t>(
      Mix64(slot_hash ^ (static_cast<uint64_t>(generation) << 20 | static_cast<uint64_t>(word))));
}

}  // namespace kvshard

#endif  // KVSHARD_CORE_PAYLOAD_H_
