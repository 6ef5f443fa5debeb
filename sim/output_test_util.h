// Helpers for the simulate output tests: small workloads, a recorded run, the bundled Mooncake trace, and an
// XML well-formedness check for the SVG plots.
#ifndef KVSHARD_SIM_OUTPUT_TEST_UTIL_H_
#define KVSHARD_SIM_OUTPUT_TEST_UTIL_H_

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/workload.h"
#include "sim/record.h"
#include "sim/simulator.h"

namespace kvshard::sim {

// A Mooncake JSONL workload from text.
inline Workload MooncakeWorkload(const std::string& text) {
  std::istringstream in(text);
  StatusOr<Workload> w = ReadWorkload(in, WorkloadFormat::kMooncake);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? *w : Workload{};
}

// `n` conversation turns: every fourth starts a new conversation, the others extend the previous prompt, so
// prefixes are shared; arrivals 20 ms apart.
inline Workload Conversations(int n) {
  std::string text;
  std::vector<int64_t> blocks;
  for (int i = 0; i < n; ++i) {
    if (i % 4 == 0) blocks.clear();
    blocks.push_back(1000 + i);
    std::string ids;
    for (size_t k = 0; k < blocks.size(); ++k) ids += (k ? ", " : "") + std::to_string(blocks[k]);
    text += "{\"timestamp\": " + std::to_string(20 * i) +
            ", \"input_length\": " + std::to_string(512 * static_cast<int64_t>(blocks.size()) - 100) +
            ", \"output_length\": " + std::to_string(10 + i % 7) + ", \"hash_ids\": [" + ids + "]}\n";
  }
  return MooncakeWorkload(text);
}

// `n` prompts of 4,000 tokens sharing nothing (8 blocks of their own), `gap_ms` apart.
inline Workload UniquePrompts(int n, int64_t gap_ms) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    std::string ids;
    for (int b = 0; b < 8; ++b) ids += (b ? ", " : "") + std::to_string(10 * i + b);
    text += "{\"timestamp\": " + std::to_string(i * gap_ms) +
            ", \"input_length\": 4000, \"output_length\": 1, \"hash_ids\": [" + ids + "]}\n";
  }
  return MooncakeWorkload(text);
}

// A small serving configuration.
inline SimConfig SmallConfig(int64_t shard_size = 4, int64_t cp_size = 1) {
  SimConfig c;
  c.shard_size = shard_size;
  c.cp_size = cp_size;
  c.page_size = 64;
  c.chunked_prefill_size = 1024;
  c.max_prefill_tokens = 2048;
  return c;
}

// A run and its record.
struct Recorded {
  SimResult result;
  SimRecord record;
};

inline Recorded RunRecorded(const Workload& w, const SimConfig& c) {
  Recorded out;
  StatusOr<SimResult> r = Simulate(w, c, nullptr, &out.record);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) out.result = *r;
  return out;
}

// The bundled Mooncake conversation trace (12,031 requests).
inline Workload BundledMooncake() {
  const char* dir = std::getenv("TEST_SRCDIR");
  std::ifstream in(std::string(dir ? dir : ".") + "/kvshard/testdata/workloads/mooncake_conversation_trace.jsonl");
  EXPECT_TRUE(in) << "bundled trace not found";
  StatusOr<Workload> w = ReadWorkload(in, WorkloadFormat::kAuto);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? *w : Workload{};
}

// What an XML check found: the root element, its attributes, and how many elements of each name.
struct XmlShape {
  std::string error;  // empty when well-formed
  std::string root;
  std::map<std::string, std::string> root_attrs;
  std::map<std::string, int> counts;
};

// Checks that `text` is one well-formed XML element tree (an optional <?xml ...?> prolog, balanced start and end
// tags, quoted attributes, no raw '<' or '&' outside entity references in text or attributes).
inline XmlShape CheckXml(const std::string& text) {
  XmlShape shape;
  std::vector<std::string> stack;
  size_t i = 0, roots = 0;
  auto fail = [&](const std::string& what) {
    shape.error = what + " at offset " + std::to_string(i);
    return shape;
  };
  auto entity_ok = [&](size_t at) {
    for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"}) {
      if (text.compare(at, std::string(e).size(), e) == 0) return true;
    }
    return false;
  };
  if (text.compare(0, 5, "<?xml") == 0) {
    i = text.find("?>");
    if (i == std::string::npos) return fail("unterminated prolog");
    i += 2;
  }
  while (i < text.size()) {
    if (text[i] != '<') {
      if (text[i] == '&' && !entity_ok(i)) return fail("bad entity");
      if (stack.empty() && !std::isspace(static_cast<unsigned char>(text[i]))) return fail("text outside the root");
      ++i;
      continue;
    }
    const bool closing = i + 1 < text.size() && text[i + 1] == '/';
    size_t j = i + (closing ? 2 : 1);
    const size_t name_start = j;
    auto name_char = [&](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == ':'; };
    while (j < text.size() && name_char(text[j])) ++j;
    const std::string name = text.substr(name_start, j - name_start);
    if (name.empty()) return fail("tag without a name");
    std::map<std::string, std::string> attrs;
    bool self_closing = false;
    while (true) {
      while (j < text.size() && std::isspace(static_cast<unsigned char>(text[j]))) ++j;
      if (j >= text.size()) return fail("unterminated tag <" + name);
      if (text[j] == '>') break;
      if (text.compare(j, 2, "/>") == 0 && !closing) {
        self_closing = true;
        ++j;
        break;
      }
      if (closing) return fail("attributes on an end tag");
      const size_t a = j;
      while (j < text.size() && text[j] != '=' && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
      const std::string key = text.substr(a, j - a);
      if (key.empty() || j + 1 >= text.size() || text[j] != '=' || text[j + 1] != '"') return fail("bad attribute");
      const size_t end = text.find('"', j + 2);
      if (end == std::string::npos) return fail("unterminated attribute");
      for (size_t k = j + 2; k < end; ++k) {
        if (text[k] == '<' || (text[k] == '&' && !entity_ok(k))) return fail("bad attribute value");
      }
      if (attrs.count(key)) return fail("duplicate attribute " + key);
      attrs[key] = text.substr(j + 2, end - j - 2);
      j = end + 1;
    }
    i = j + 1;
    if (closing) {
      if (stack.empty() || stack.back() != name) return fail("mismatched </" + name + ">");
      stack.pop_back();
      continue;
    }
    if (stack.empty()) {
      if (roots++ > 0) return fail("a second root element");
      shape.root = name;
      shape.root_attrs = attrs;
    }
    ++shape.counts[name];
    if (!self_closing) stack.push_back(name);
  }
  if (!stack.empty()) return fail("unclosed <" + stack.back() + ">");
  if (roots == 0) return fail("no root element");
  return shape;
}

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_OUTPUT_TEST_UTIL_H_
