// An answer kept as typed fields (strings, bools, integers, integer lists, lists of them, lists of objects of such
// fields) until it must be
// JSON: most records' expects are checked against the fields directly, without building and freeing a JSON value
// per record; a mismatch, or an expect the fields cannot decide, takes the JSON path with the same verdict.
#ifndef KVSHARD_REPLAY_FIELD_ANSWER_H_
#define KVSHARD_REPLAY_FIELD_ANSWER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/trace.h"

namespace kvshard::replay {

class FieldAnswer;

// An expect (an object) with its integer, integer-list and list-of-integer-lists values typed ahead: made on a reader
// thread, so the checking thread's SurelyMatches compares typed values instead of walking JSON. Any other value (a
// string, a bool, an unsigned past int64, a float, an object, a mixed list) keeps its JSON, compared as
// FieldAnswer::SurelyMatches(const Json&) compares it. Holds pointers into `expect`, which must outlive it.
class TypedExpect {
 public:
  // Holds no expect (not an object: SurelyMatches says "not sure").
  TypedExpect() = default;
  explicit TypedExpect(const Json& expect) { Assign(expect); }
  // Types `expect` in place of what this held, reusing its lists' memory (a reader thread reuses its records'); a
  // large expect's memory is not kept for the next.
  void Assign(const Json& expect);

 private:
  // The integers (and lists) an expect may hold and still leave its lists' memory to the next Assign.
  static constexpr int64_t kKeptInts = int64_t{1} << 14;

  friend class FieldAnswer;
  enum class Kind { kJson, kInt, kInts, kIntLists };
  struct Entry {
    const std::string* key;
    const Json* json;  // the value as written: decides whenever the typed one cannot
    Kind kind = Kind::kJson;
    int64_t number = 0;
    std::vector<int64_t> ints;
    std::vector<std::vector<int64_t>> lists;
  };
  bool object_ = false;
  std::vector<Entry> entries_;  // entries_[0, count_) are the expect's; the rest keep their memory for reuse
  size_t count_ = 0;
  int64_t ints_ = 0;  // the integers and lists typed into entries_ by the last Assign
};

// The top-level fields of one answer, in the order its JSON lists them.
class FieldAnswer {
 public:
  void Add(const char* key, std::string value);
  void Add(const char* key, bool value);
  void Add(const char* key, int64_t value);
  void Add(const char* key, std::vector<int64_t> value);
  void Add(const char* key, std::vector<std::vector<int64_t>> value);
  // A list of flat.size() / width integer lists of `width` integers each, kept row after row in one vector (its
  // JSON and checks those of the nested lists; one allocation, not one per row). width >= 1, whole rows only.
  void AddRows(const char* key, std::vector<int64_t> flat, int64_t width);
  // A list of objects, each its own typed fields (a gather plan's ranks).
  void Add(const char* key, std::vector<FieldAnswer> value);
  // Any other value (checked with MatchExpect on its own).
  void Add(const char* key, Json value);

  // The answer as JSON (what the op's JSON executor returns).
  Json ToJson() const;
  // True, with the scalars compared added to *fields, when every key of `expect` (an object) is a field equal to
  // its value as MatchExpect compares them; false (nothing added) when that is not certain: a missing key, another
  // type, a different value. MatchExpect against ToJson() then decides, so the verdict never depends on this.
  bool SurelyMatches(const Json& expect, int64_t* fields) const;
  // The same verdict and count as SurelyMatches(the expect `expect` was made from), typed values compared directly.
  bool SurelyMatches(const TypedExpect& expect, int64_t* fields) const;

 private:
  enum class Kind { kString, kBool, kInt, kInts, kIntLists, kIntRows, kObjects, kJson };
  // The values of the kinds most answers do not have, held apart so that a field stays small: an answer's fields
  // (kFieldsReserved of them) then fit one allocation that malloc's per-thread cache serves.
  struct Rare {
    std::string text;                         // kString's
    std::vector<std::vector<int64_t>> lists;  // kIntLists'
    std::vector<FieldAnswer> objects;         // kObjects'
    Json json;                                // kJson's
  };
  struct Field {
    const char* key;
    Kind kind;
    bool flag = false;           // kBool's value
    int64_t number = 0;          // kInt's value; kIntRows' width
    std::vector<int64_t> ints;   // kInts' list; kIntRows' rows, one after another
    std::unique_ptr<Rare> rare;  // set for kString, kIntLists, kObjects and kJson
  };
  // The fields an answer has room for at its first: most have at most this many.
  static constexpr size_t kFieldsReserved = 8;
  // A kIntRows field's rows, and its row i.
  static size_t RowCount(const Field& f);
  static std::span<const int64_t> Row(const Field& f, size_t i);
  // Appends a field of `kind` named `key`; its value is set by the caller.
  Field& NewField(const char* key, Kind kind);
  // Appends a field of a rare kind named `key`; its value is set by the caller.
  Rare& NewRareField(const char* key, Kind kind);
  // The field named `key`, or null; with `hint`, searched from field *hint on (wrapping) and *hint set past it.
  const Field* Find(const std::string& key, size_t* hint = nullptr) const;
  // SurelyMatches' check of one key: `f` against the expect's value `want`, its scalars added to *compared.
  bool SurelyMatchesKey(const Field& f, const Json& want, int64_t* compared) const;
  std::vector<Field> fields_;
};

}  // namespace kvshard::replay

#endif  // KVSHARD_REPLAY_FIELD_ANSWER_H_
