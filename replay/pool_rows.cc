// A pipeline trace's pool: its header (the geometry: layers, scratch, buffers, payload seed) and the rows its slots
// hold (slot runs, payload words and rows, a value of (seed, layer, slot, generation) so a wrong row is visible).
#include "replay/pool_replay.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/hash.h"
#include "core/payload.h"
#include "core/pool_json.h"
#include "core/spec.h"

namespace kvshard::replay {

int64_t SlotRuns(const std::vector<int64_t>& locs, int64_t page_size, int64_t slots, std::vector<SlotRun>* runs) {
  runs->clear();
  const int64_t* loc = locs.data();
  const int64_t n = static_cast<int64_t>(locs.size());
  for (int64_t i = 0; i < n;) {
    const int64_t first = loc[i];
    if (first < 0 || first >= slots) return i;
    // The run goes on while the slots count up, to its page's end (first is a slot: no overflow).
    const int64_t most = std::min({(first / page_size + 1) * page_size, slots, first + (n - i)}) - first;
    int64_t len = 1;
    // Four slots a step, one branch for them (XOR: any slot value, no overflow).
    const auto differs = [&](int64_t k) {
      return static_cast<uint64_t>(loc[i + k]) ^ static_cast<uint64_t>(first + k);
    };
    while (len + 4 <= most && (differs(len) | differs(len + 1) | differs(len + 2) | differs(len + 3)) == 0) len += 4;
    while (len < most && loc[i + len] == first + len) ++len;
    runs->push_back({first, len});
    i += len;
  }
  return -1;
}

uint32_t PayloadWord(uint64_t seed, int64_t layer, int64_t loc, int64_t generation, int64_t word) {
  return PayloadWordOf(PayloadSlotHash(seed, Mix64(static_cast<uint64_t>(layer)), loc), generation, word);
}

namespace {

// PayloadRows(Of): with `unwritten_zero`, generation 0 is zero bytes. `generation_of(i)` is locs[i]'s generation.
template <typename GenerationOf>
ref::BufferRows MakePayloadRows(const PoolGeometry& g, int64_t layer, const std::vector<int64_t>& locs,
                                const GenerationOf& generation_of, bool unwritten_zero) {
  // A slot's row is computed once, a word at a time (its hash prefix once per slot), then cut into the buffers.
  int64_t slot_bytes = 0;
  for (const ref::PoolBuffer& b : g.buffers) slot_bytes += b.row_bytes;
  const int64_t words = (slot_bytes + 3) / 4;
  const uint64_t layer_hash = Mix64(static_cast<uint64_t>(layer));
  ref::BufferRows rows;
  for (const ref::PoolBuffer& b : g.buffers) rows.emplace_back(locs.size() * static_cast<size_t>(b.row_bytes));
  const auto word_of = [&](uint64_t slot_hash, int64_t generation, int64_t w) -> uint32_t {
    return unwritten_zero && generation == 0 ? 0 : PayloadWordOf(slot_hash, generation, w);
  };
  if (std::endian::native == std::endian::little && g.buffers.size() == 1 && slot_bytes % 4 == 0) {
    // One buffer of whole words (every trace `gen` writes): the words go straight into the slot's row.
    uint8_t* row = rows[0].data();
    for (size_t i = 0; i < locs.size(); ++i) {
      const int64_t generation = generation_of(i);
      const uint64_t slot_hash = PayloadSlotHash(g.payload_seed, layer_hash, locs[i]);
      for (int64_t w = 0; w < words; ++w, row += 4) {
        const uint32_t x = word_of(slot_hash, generation, w);
        std::memcpy(row, &x, 4);
      }
    }
    return rows;
  }
  std::vector<uint8_t> slot_row(static_cast<size_t>(words) * 4);
  for (size_t i = 0; i < locs.size(); ++i) {
    const int64_t generation = generation_of(i);
    const uint64_t slot_hash = PayloadSlotHash(g.payload_seed, layer_hash, locs[i]);
    for (int64_t w = 0; w < words; ++w) {
      const uint32_t x = word_of(slot_hash, generation, w);
      for (int k = 0; k < 4; ++k) slot_row[w * 4 + k] = static_cast<uint8_t>(x >> (8 * k));  // low byte first
    }
    int64_t offset = 0;  // of the buffer in the slot's concatenated row
    for (size_t b = 0; b < g.buffers.size(); ++b) {
      const size_t width = static_cast<size_t>(g.buffers[b].row_bytes);
      std::memcpy(rows[b].data() + i * width, slot_row.data() + offset, width);
      offset += g.buffers[b].row_bytes;
    }
  }
  return rows;
}

}  // namespace

ref::BufferRows PayloadRows(const PoolGeometry& g, int64_t layer, const std::vector<int64_t>& locs,
                            int64_t generation) {
  return MakePayloadRows(
      g, layer, locs, [generation](size_t) { return generation; }, false);
}

ref::BufferRows PayloadRowsOf(const PoolGeometry& g, int64_t layer, const std::vector<int64_t>& locs,
                              const std::function<int64_t(size_t)>& generation_of) {
  return MakePayloadRows(g, layer, locs, generation_of, true);
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

}  // namespace kvshard::replay
