// FieldAnswer: typed answer fields, their JSON, and the expect check that needs no JSON when everything is equal.
#include "replay/field_answer.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <utility>

namespace kvshard::replay {
namespace {

// True when `want` is an integer of value `got` (signed or unsigned in the expect's JSON).
bool IsInteger(const Json& want, int64_t got) {
  const std::optional<int64_t> x = JsonInt64(want);
  return x && *x == got;
}

// `v`'s elements into *out when `v` is a list of JsonInt64 integers; false (and *out empty) otherwise.
bool Int64sOf(const Json& v, std::vector<int64_t>* out) {
  out->clear();
  if (!v.is_array()) return false;
  const Json::array_t& elements = v.get_ref<const Json::array_t&>();
  out->reserve(elements.size());
  for (const Json& e : elements) {
    const std::optional<int64_t> x = JsonInt64(e);
    if (!x) {
      out->clear();
      return false;
    }
    out->push_back(*x);
  }
  return true;
}

// MatchExpect's count for an equal integer list (one per element), or -1 when not surely equal.
int64_t SurelyEqualInts(const Json& want, std::span<const int64_t> got) {
  if (!want.is_array()) return -1;
  const Json::array_t& elements = want.get_ref<const Json::array_t&>();  // no per-element is_array and bounds checks
  if (elements.size() != got.size()) return -1;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!IsInteger(elements[i], got[i])) return -1;
  }
  return static_cast<int64_t>(got.size());
}

}  // namespace

FieldAnswer::Field& FieldAnswer::NewField(const char* key, Kind kind) {
  if (fields_.empty()) fields_.reserve(kFieldsReserved);  // one allocation for most answers, not one per doubling
  fields_.push_back(Field{key, kind});
  return fields_.back();
}

FieldAnswer::Rare& FieldAnswer::NewRareField(const char* key, Kind kind) {
  Field& f = NewField(key, kind);
  f.rare = std::make_unique<Rare>();
  return *f.rare;
}

void FieldAnswer::Add(const char* key, std::string value) { NewRareField(key, Kind::kString).text = std::move(value); }

void FieldAnswer::Add(const char* key, bool value) { NewField(key, Kind::kBool).flag = value; }

void FieldAnswer::Add(const char* key, int64_t value) { NewField(key, Kind::kInt).number = value; }

void FieldAnswer::Add(const char* key, std::vector<int64_t> value) {
  NewField(key, Kind::kInts).ints = std::move(value);
}

void FieldAnswer::Add(const char* key, std::vector<std::vector<int64_t>> value) {
  NewRareField(key, Kind::kIntLists).lists = std::move(value);
}

void FieldAnswer::AddRows(const char* key, std::vector<int64_t> flat, int64_t width) {
  KVSHARD_CHECK(width >= 1 && flat.size() % static_cast<size_t>(width) == 0);  // whole rows, by the callers' code
  Field& f = NewField(key, Kind::kIntRows);
  f.ints = std::move(flat);
  f.number = width;
}

size_t FieldAnswer::RowCount(const Field& f) { return f.ints.size() / static_cast<size_t>(f.number); }

std::span<const int64_t> FieldAnswer::Row(const Field& f, size_t i) {
  const size_t width = static_cast<size_t>(f.number);
  return std::span<const int64_t>(f.ints).subspan(i * width, width);
}

void FieldAnswer::Add(const char* key, std::vector<FieldAnswer> value) {
  NewRareField(key, Kind::kObjects).objects = std::move(value);
}

void FieldAnswer::Add(const char* key, Json value) { NewRareField(key, Kind::kJson).json = std::move(value); }

Json FieldAnswer::ToJson() const {
  Json j = Json::object();
  for (const Field& f : fields_) {
    switch (f.kind) {
      case Kind::kString: j[f.key] = f.rare->text; break;
      case Kind::kBool: j[f.key] = f.flag; break;
      case Kind::kInt: j[f.key] = f.number; break;
      case Kind::kInts: j[f.key] = f.ints; break;
      case Kind::kIntLists: j[f.key] = f.rare->lists; break;
      case Kind::kIntRows: {
        Json rows = Json::array();
        for (size_t i = 0; i < RowCount(f); ++i) {
          const std::span<const int64_t> row = Row(f, i);
          rows.push_back(std::vector<int64_t>(row.begin(), row.end()));
        }
        j[f.key] = std::move(rows);
        break;
      }
      case Kind::kObjects: {
        Json list = Json::array();
        for (const FieldAnswer& o : f.rare->objects) list.push_back(o.ToJson());
        j[f.key] = std::move(list);
        break;
      }
      case Kind::kJson: j[f.key] = f.rare->json; break;
    }
  }
  return j;
}

const FieldAnswer::Field* FieldAnswer::Find(const std::string& key, size_t* hint) const {
  // From the field after the last one found: an expect lists its fields in the answer's order, as recorded.
  const size_t n = fields_.size(), from = hint != nullptr && *hint < n ? *hint : 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = from + k < n ? from + k : from + k - n;
    // strcmp stops at a NUL inside the key: equal only if the lengths agree too.
    if (std::strcmp(key.c_str(), fields_[i].key) == 0 && key.size() == std::strlen(fields_[i].key)) {
      if (hint != nullptr) *hint = i + 1;
      return &fields_[i];
    }
  }
  return nullptr;
}

bool FieldAnswer::SurelyMatchesKey(const Field& f, const Json& want, int64_t* compared) const {
  switch (f.kind) {
    case Kind::kString:
      if (!want.is_string() || want.get_ref<const std::string&>() != f.rare->text) return false;
      ++*compared;
      return true;
    case Kind::kBool:
      if (!want.is_boolean() || want.get<bool>() != f.flag) return false;
      ++*compared;
      return true;
    case Kind::kInt:
      if (!IsInteger(want, f.number)) return false;
      ++*compared;
      return true;
    case Kind::kInts: {
      const int64_t n = SurelyEqualInts(want, f.ints);
      if (n < 0) return false;
      *compared += n;
      return true;
    }
    case Kind::kIntLists:
      if (!want.is_array() || want.size() != f.rare->lists.size()) return false;
      for (size_t i = 0; i < f.rare->lists.size(); ++i) {
        const int64_t n = SurelyEqualInts(want[i], f.rare->lists[i]);
        if (n < 0) return false;
        *compared += n;
      }
      return true;
    case Kind::kIntRows:
      if (!want.is_array() || want.size() != RowCount(f)) return false;
      for (size_t i = 0; i < RowCount(f); ++i) {
        const int64_t n = SurelyEqualInts(want[i], Row(f, i));
        if (n < 0) return false;
        *compared += n;
      }
      return true;
    case Kind::kObjects:  // each element an object whose keys are its fields' (MatchExpect's object subset)
      if (!want.is_array() || want.size() != f.rare->objects.size()) return false;
      for (size_t i = 0; i < f.rare->objects.size(); ++i) {
        if (!f.rare->objects[i].SurelyMatches(want[i], compared)) return false;
      }
      return true;
    case Kind::kJson:  // what MatchExpect does at this key
      return !MatchExpect(want, f.rare->json, compared);
  }
  return false;
}

bool FieldAnswer::SurelyMatches(const Json& expect, int64_t* fields) const {
  if (!expect.is_object()) return false;
  int64_t compared = 0;
  size_t hint = 0;
  for (const auto& [key, want] : expect.items()) {
    const Field* f = Find(key, &hint);
    if (f == nullptr || !SurelyMatchesKey(*f, want, &compared)) return false;
  }
  *fields += compared;
  return true;
}

void TypedExpect::Assign(const Json& expect) {
  if (ints_ > kKeptInts) std::vector<Entry>().swap(entries_);  // a large expect's lists are not kept
  object_ = expect.is_object();
  count_ = 0;
  ints_ = 0;
  if (!object_) return;
  if (entries_.size() < expect.size()) entries_.resize(expect.size());
  for (auto it = expect.begin(); it != expect.end(); ++it) {
    Entry& e = entries_[count_++];
    e.key = &it.key();
    e.json = &it.value();
    e.kind = Kind::kJson;
    const Json& v = it.value();
    if (const std::optional<int64_t> x = JsonInt64(v)) {
      e.kind = Kind::kInt;
      e.number = *x;
    } else if (Int64sOf(v, &e.ints)) {
      e.kind = Kind::kInts;
      ints_ += static_cast<int64_t>(e.ints.size());
    } else if (v.is_array() && !v.empty() && v.front().is_array()) {  // a list of integer lists, or JSON
      e.lists.resize(v.size());
      ints_ += static_cast<int64_t>(v.size());  // the lists themselves count
      e.kind = Kind::kIntLists;
      for (size_t i = 0; i < v.size() && e.kind == Kind::kIntLists; ++i) {
        if (!Int64sOf(v[i], &e.lists[i])) e.kind = Kind::kJson;
        ints_ += static_cast<int64_t>(e.lists[i].size());
      }
      if (e.kind == Kind::kJson) e.lists.clear();
    }
  }
}

bool FieldAnswer::SurelyMatches(const TypedExpect& expect, int64_t* fields) const {
  using E = TypedExpect::Kind;
  if (!expect.object_) return false;
  int64_t compared = 0;
  size_t hint = 0;
  for (size_t k = 0; k < expect.count_; ++k) {
    const TypedExpect::Entry& e = expect.entries_[k];
    const Field* f = Find(*e.key, &hint);
    if (f == nullptr) return false;
    // The typed comparison where both sides have the kind; the JSON one (the same verdict) for everything else.
    if (e.kind == E::kInt && f->kind == Kind::kInt) {
      if (e.number != f->number) return false;
      ++compared;
    } else if (e.kind == E::kInts && f->kind == Kind::kInts) {
      if (e.ints != f->ints) return false;
      compared += static_cast<int64_t>(e.ints.size());
    } else if (e.kind == E::kIntLists && f->kind == Kind::kIntLists) {
      if (e.lists != f->rare->lists) return false;
      for (const std::vector<int64_t>& l : e.lists) compared += static_cast<int64_t>(l.size());
    } else if (e.kind == E::kIntLists && f->kind == Kind::kIntRows) {
      if (e.lists.size() != RowCount(*f)) return false;
      for (size_t r = 0; r < e.lists.size(); ++r) {
        const std::span<const int64_t> row = Row(*f, r);
        if (!std::equal(e.lists[r].begin(), e.lists[r].end(), row.begin(), row.end())) return false;
        compared += static_cast<int64_t>(row.size());
      }
    } else if (!SurelyMatchesKey(*f, *e.json, &compared)) {
      return false;
    }
  }
  *fields += compared;
  return true;
}

}  // namespace kvshard::replay
