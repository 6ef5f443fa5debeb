// A replay mismatch as one value, and its two renderings: the text line `kvshard replay` prints ("line N: <op>:
// <field>: <detail>[ meta=<json>]") and the object `replay --json` lists (docs/trace-format.md, "Replay's answers").
#ifndef KVSHARD_REPLAY_MISMATCH_H_
#define KVSHARD_REPLAY_MISMATCH_H_

#include <cstdint>
#include <optional>
#include <string>

#include "core/json.h"
#include "core/trace.h"

namespace kvshard::replay {

// The first difference of one record.
struct ReplayMismatch {
  int64_t line = 0;
  std::string op;
  // The expect path that differs ("pages[0][2]", "ranks[1].send_rows"; "" for the whole answer), "error" (an
  // expected or unexpected rejection), or "invariant" / "diff" (a model invariant, a --backend diff difference).
  std::string field;
  std::optional<Json> expected;  // the value expect gives at `field` (for "error": the text it must contain)
  std::optional<Json> got;       // the answer's value there (for "error": the rejection's message); none: absent
  std::string detail;            // what the text line says after "<field>: "
  Json meta;                     // the record's "meta" object, null when it has none
};

// The mismatch of an expect comparison (core/trace.h's MatchExpect) of `record`.
ReplayMismatch ExpectValueMismatch(const TraceRecord& record, const ExpectMismatch& m);
// A mismatch of `record` described by `field` and `detail`, with the values when there are some.
ReplayMismatch RecordMismatch(const TraceRecord& record, std::string field, std::string detail,
                              std::optional<Json> expected = std::nullopt, std::optional<Json> got = std::nullopt);

// "line N: <op>: <field>: <detail>", then " meta=<compact json>" when the record has meta.
std::string MismatchText(const ReplayMismatch& m);
// {"line", "op", "field", "expected" (when known), "got" (when present), "message" (the text line), "meta" (when
// the record has one)}.
Json MismatchJson(const ReplayMismatch& m);

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_MISMATCH_H_
