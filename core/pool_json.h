// JSON readers and writers of the pool-model inputs and outputs: extend batches (`gather-plan --batch`),
// allocator scripts (`alloc --script`), gather plans and allocator results. Field names are SGLang's.
// Readers validate completely: every malformed input is a Status naming the field (CLI exit 2).
#ifndef KVSHARD_CORE_POOL_JSON_H_
#define KVSHARD_CORE_POOL_JSON_H_

#include <cstdint>
#include <string>

#include "core/alloc_script.h"
#include "core/gather_plan.h"
#include "core/json.h"
#include "core/status.h"

namespace kvshard {

// Reads and structurally validates an extend batch (see ValidateExtendBatch); the pre-rename key
// pool_pages_per_rank (which counted the trash page) is rejected, saying what changed.
StatusOr<ExtendBatch> ExtendBatchFromJson(const Json& j);
// Its "requests" list alone ("requests[i].<field>: ..." errors; ValidateExtendBatch checks the batch they make).
StatusOr<std::vector<ExtendRequest>> ExtendRequestsFromJson(const Json& requests);
// Writes an extend batch in the form ExtendBatchFromJson reads.
Json ExtendBatchToJson(const ExtendBatch& batch);

// Reads one alloc_extend call (prefix_lens, seq_lens, rotation_bases, last_locs) from `o`; errors name
// `where` + the field, e.g. "ops[1].seq_lens[0]".
StatusOr<AllocBatch> AllocBatchFromJson(const Json& o, const std::string& where, int64_t shard_size);
// Reads an allocator script; errors name the field, e.g. "ops[1].seq_lens[0]".
StatusOr<AllocScript> AllocScriptFromJson(const Json& j);
// Writes an allocator script in the form AllocScriptFromJson reads.
Json AllocScriptToJson(const AllocScript& script);

// The `gather-plan --json` object (without scratch_rows): block_pages, n_prefix_slots, trash_page,
// chunk_base_page, page_pos [[page, scratch_page], ...] and ranks [{rank, send_local_pages, send_rows}].
Json GatherPlanToJson(const GatherPlan& plan);
// One `alloc --json` result: op, ok, rotation_bases, pages, class_free_page_counts, available_size,
// aggregate_free_size (ok/rotation_bases/pages for alloc ops only; bases and pages only when ok).
Json AllocOpResultToJson(const AllocOpResult& result);

}  // namespace kvshard

#endif  // KVSHARD_CORE_POOL_JSON_H_
