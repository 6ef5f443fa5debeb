// The sweep's table and CSV, built from the rows' JSON (the single-run --json keys, plus index, sweep, error).
#include "cli/sim_sweep_output.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <cstdio>
#include <ostream>
#include <utility>

namespace kvshard::cli {
namespace {

// A JSON scalar as a cell: integers as written, reals with `digits` decimals (in %g form from 10^9 on, so a
// cell stays short: 1e+300, not 301 digits), strings raw, null empty.
std::string Cell(const Json& v, int digits = 3) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[64];
    const double x = v.get<double>();
    if (std::abs(x) >= 1e9) {
      std::snprintf(buf, sizeof buf, "%.3g", x);
    } else {
      std::snprintf(buf, sizeof buf, "%.*f", digits, x);
    }
    return buf;
  }
  return v.dump();
}

// row[a][b] or null when absent.
const Json& At(const Json& row, const char* a, const char* b = nullptr) {
  static const Json kNull;
  if (!row.is_object() || !row.contains(a)) return kNull;
  const Json& v = row.at(a);
  if (!b) return v;
  return v.is_object() && v.contains(b) ? v.at(b) : kNull;
}

// Nested objects flattened to (a.b, scalar) in their order.
void Flatten(const Json& j, const std::string& prefix, std::vector<std::pair<std::string, Json>>* out) {
  for (const auto& [key, value] : j.items()) {
    const std::string name = prefix.empty() ? key : prefix + "." + key;
    if (value.is_object()) {
      Flatten(value, name, out);
    } else {
      out->emplace_back(name, value);
    }
  }
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

void PrintSweepTable(const std::vector<std::string>& keys, const std::vector<Json>& rows, std::ostream& out) {
  // With CP rows, two more columns: direct-write pages failing the owner check, gather plans SGLang rejects.
  const bool cp = std::any_of(rows.begin(), rows.end(), [](const Json& r) { return r.contains("direct_write"); });
  std::vector<std::string> header = {"#"};
  header.insert(header.end(), keys.begin(), keys.end());
  for (const char* h : {"requests", "batches", "util", "ttft_p50_s", "ttft_p99_s", "hit_tokens", "pages_max",
                        "skew_max", "evicted", "deferrals", "gather_p99_MiB", "cp_padding", "dw_fail_pages",
                        "gather_rejects", "batch_p99_us", "simulated_s", "violations", "status"}) {
    if (cp || (std::string(h) != "dw_fail_pages" && std::string(h) != "gather_rejects")) header.push_back(h);
  }
  std::vector<std::vector<std::string>> table = {header};
  for (const Json& row : rows) {
    std::vector<std::string> line = {Cell(At(row, "index"))};
    for (const std::string& key : keys) line.push_back(Cell(At(row, "sweep", key.c_str()), 6));
    if (row.contains("error")) {
      line.resize(header.size() - 1, "-");
      line.push_back("error: " + Cell(row["error"]));
    } else {
      const Json& p99 = At(row, "gathered_bytes_per_layer", "p99");
      line.push_back(Cell(At(row, "requests")));
      line.push_back(Cell(At(row, "batches")));
      line.push_back(Cell(At(row, "prefill_node", "utilization"), 2));
      const Json& ttft = At(row, "prefill_node", "ttft_ms");
      for (const char* q : {"p50", "p99"}) {
        const Json& ms = At(ttft, q);
        line.push_back(ms.is_number() ? Cell(Json(ms.get<double>() / 1e3), 2) : "");
      }
      line.push_back(Cell(At(row, "prefix_hit_rate_tokens")));
      line.push_back(Cell(At(row, "pages_in_use", "max")) + "/" + Cell(At(row, "pool_pages_per_rank")));
      line.push_back(Cell(At(row, "pages_in_use", "skew_max")));
      line.push_back(Cell(At(row, "evictions")));
      line.push_back(Cell(At(row, "deferrals")));
      line.push_back(p99.is_number() ? Cell(Json(p99.get<double>() / (1 << 20)), 2) : "");
      line.push_back(Cell(At(row, "cp_padding_fraction")));
      if (cp) {
        const Json& fail = At(row, "direct_write", "local_loc_owner_mismatch_pages");
        const Json& rejects = At(row, "direct_write", "gather_plan_rejections");
        line.push_back(fail.is_null() ? "-" : Cell(fail));
        line.push_back(rejects.is_null() ? "-" : Cell(rejects));
      }
      line.push_back(Cell(At(row, "batch_time_us", "p99"), 1));
      line.push_back(Cell(At(row, "simulated_s"), 1));
      line.push_back(Cell(At(row, "violations")));
      const Json& first = At(row, "first_violation");
      line.push_back(first.is_string() ? "violation: " + first.get<std::string>() : "ok");
    }
    table.push_back(std::move(line));
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto& line : table) {
    for (size_t c = 0; c + 1 < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  }
  for (const auto& line : table) {
    for (size_t c = 0; c < line.size(); ++c) {
      if (c + 1 == line.size()) {
        out << line[c] << "\n";
      } else {
        out << std::string(width[c] - line[c].size(), ' ') << line[c] << "  ";
      }
    }
  }
}

void WriteSweepCsv(const std::vector<std::string>& keys, const std::vector<Json>& rows, std::ostream& out) {
  // Columns: every flattened figure any row has, in first-seen order; error and exit_code last.
  std::vector<std::string> columns;
  std::vector<std::vector<std::pair<std::string, Json>>> flat(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    Json figures = rows[i];
    for (const char* drop : {"index", "sweep", "error", "exit_code"}) figures.erase(drop);
    Flatten(figures, "", &flat[i]);
    for (const auto& [name, value] : flat[i]) {
      if (std::find(columns.begin(), columns.end(), name) == columns.end()) columns.push_back(name);
    }
  }
  out << "index";
  for (const std::string& key : keys) out << "," << CsvField(key);
  for (const std::string& c : columns) out << "," << CsvField(c);
  out << ",error,exit_code\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    out << Cell(At(rows[i], "index"));
    for (const std::string& key : keys) out << "," << CsvField(At(rows[i], "sweep", key.c_str()).dump());
    for (const std::string& c : columns) {
      const auto it = std::find_if(flat[i].begin(), flat[i].end(), [&](const auto& f) { return f.first == c; });
      const Json v = it == flat[i].end() ? Json() : it->second;
      out << "," << CsvField(v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump());
    }
    const Json& error = At(rows[i], "error");
    out << "," << CsvField(error.is_string() ? error.get<std::string>() : "") << ","
        << (rows[i].contains("exit_code") ? rows[i]["exit_code"].dump()
            : At(rows[i], "violations").is_number() && At(rows[i], "violations").get<int64_t>() > 0 ? "1"
                                                                                                    : "0")
        << "\n";
  }
}

std::vector<sim::Plot> SweepPlots(const std::vector<std::string>& keys, const std::vector<Json>& rows) {
  static const char* const kColors[] = {"#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"};
  const std::string last = keys.empty() ? "" : keys.back();
  bool numeric = !keys.empty();  // the last axis as x when its values are numbers, else its position
  for (const Json& row : rows) numeric = numeric && At(row, "sweep", last.c_str()).is_number();
  std::vector<std::string> groups;  // the other axes' values, in row order
  std::map<std::string, std::vector<const Json*>> members;
  for (const Json& row : rows) {
    if (row.contains("error")) continue;
    std::string group;
    for (size_t k = 0; k + 1 < keys.size(); ++k) {
      group += (group.empty() ? "" : " ") + keys[k] + "=" + Cell(At(row, "sweep", keys[k].c_str()), 6);
    }
    if (!members.count(group)) groups.push_back(group);
    members[group].push_back(&row);
  }
  sim::SvgChart ttft, util;
  ttft.title = "Time to first token across the sweep";
  util.title = "Utilization of the busiest node across the sweep";
  for (sim::SvgChart* c : {&ttft, &util}) {
    c->subtitle = StrCat(rows.size(), " configurations; one line per ",
                         keys.size() > 1 ? "combination of the other swept flags" : "sweep");
    c->x_label = numeric ? last : StrCat(last, " (position in its list)");
  }
  ttft.y_label = "TTFT (s)";
  util.y_label = "busy time / arrival span";
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string name = groups[g].empty() ? "all" : groups[g];
    sim::SvgLine p50{name + " p50", kColors[g % 6], {}, {}, true}, p99{name + " p99", kColors[g % 6], {}, {}, false};
    sim::SvgLine u{name, kColors[g % 6], {}, {}, false};
    const std::vector<const Json*>& rs = members[groups[g]];
    for (size_t i = 0; i < rs.size(); ++i) {
      const Json& row = *rs[i];
      const double x = numeric ? At(row, "sweep", last.c_str()).get<double>() : static_cast<double>(i);
      const Json& t = At(row, "prefill_node", "ttft_ms");
      const Json& ut = At(row, "prefill_node", "utilization");
      if (At(t, "p50").is_number()) {
        p50.x.push_back(x);
        p50.y.push_back(At(t, "p50").get<double>() / 1e3);
        p99.x.push_back(x);
        p99.y.push_back(At(t, "p99").get<double>() / 1e3);
      }
      if (ut.is_number()) {
        u.x.push_back(x);
        u.y.push_back(ut.get<double>());
      }
    }
    ttft.lines.push_back(std::move(p50));
    ttft.lines.push_back(std::move(p99));
    util.lines.push_back(std::move(u));
  }
  if (!util.lines.empty() && !util.lines[0].x.empty()) {
    double lo = util.lines[0].x.front(), hi = lo;
    for (const sim::SvgLine& l : util.lines) {
      for (double x : l.x) lo = std::min(lo, x), hi = std::max(hi, x);
    }
    util.lines.push_back({"1: overloaded above", "#111827", {lo, hi}, {1.0, 1.0}, true});
  }
  if (groups.empty()) ttft.note = util.note = "every configuration failed: nothing to draw";
  return {{"sweep_ttft.svg", ttft}, {"sweep_utilization.svg", util}};
}

}  // namespace kvshard::cli
