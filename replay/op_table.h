// The row type of the replayer's op table (internal to //replay:replayer): one row per trace op, holding its
// name, the record fields it reads with their JSON shapes, the state it needs, and its executor. Adding a trace
// op is one row in Replayer::Ops() (replay/replayer.cc) plus its executor.
#ifndef KVSHARD_REPLAY_OP_TABLE_H_
#define KVSHARD_REPLAY_OP_TABLE_H_

#include <vector>

#include "core/json.h"
#include "core/memory_budget.h"
#include "core/status.h"
#include "replay/field_answer.h"

namespace kvshard::replay {

class Replayer;

// The JSON shape of a record field, checked before anything runs (a wrong shape is a malformed trace).
enum class Shape { kInt, kIntList, kBaseList, kObject, kString, kFrees, kBool, kObjectList, kStringList, kBase };

// One field an op reads.
struct FieldShape {
  const char* key;
  Shape shape;
  bool required;
};

// The state an op needs: none (stateless plan and CP records), the header's allocator (allocator and radix cache
// records; the allocator's and the cache's invariants are checked after each), the header's pool (pipeline), or
// the header's allocator under SGLang's request path and radix tree (request records; they do not mix with
// allocator records in one trace, whose pages the two would account for differently).
enum class OpState { kNone, kAllocator, kPipeline, kRequests };

// One trace op.
struct ReplayOp {
  const char* name;
  OpState state;
  std::vector<FieldShape> fields;  // every key the record may carry besides "op", "expect" and "meta"
  // Runs a record whose fields have their shapes; the answer is what its expect is checked against. `only` (an
  // object, may be null) names the top-level keys expect checks, so a large answer may leave out the rest. Null for
  // an op with run_fields (its answer's JSON is the fields').
  StatusOr<Json> (*run)(Replayer& replayer, const Json& rec, const Json* only);
  // The memory the record's answer needs, checked against --max-memory before `run` (replay/record_sizes.cc), for
  // the ops whose answer a few input bytes can make large (a length, not a list); null where the answer is within a
  // constant of the record's own line, which the line check already holds.
  Status (*size)(const Json& rec, const MemoryBudget& budget) = nullptr;
  // The answer as typed fields (replay/field_answer.h), for the frequent ops whose expect is then checked without
  // building JSON; null where `run` is the executor.
  StatusOr<FieldAnswer> (*run_fields)(Replayer& replayer, const Json& rec, const Json* only) = nullptr;
  // A stateful op whose executor takes its integer lists (and a begin_shard_extend's requests) typed by a reader
  // thread ahead of it (PreparedRecord's typed_ints, requests), not converted on the checking thread.
  bool takes_typed = false;
};

// The record's keys and their shapes against its op's row (replay/replayer.cc): InvalidArgument "<field>: <what>".
Status CheckFields(const Json& rec, const ReplayOp& op);
// CheckFields, then the op's size against the budget: what refuses a record before it runs.
Status CheckRecord(const Json& rec, const ReplayOp& op, const MemoryBudget& budget);

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_OP_TABLE_H_
