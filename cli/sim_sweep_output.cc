// The sweep's table and CSV, built from the rows' JSON (the single-run --json keys, plus index, sweep, error).
#include "cli/sim_sweep_output.h"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <utility>

namespace kvshard::cli {
namespace {

// A JSON scalar as a cell: integers as written, reals with `digits` decimals, strings raw, null empty.
std::string Cell(const Json& v, int digits = 3) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v.get<double>());
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

}  // namespace kvshard::cli
