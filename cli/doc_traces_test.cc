// The traces docs/trace-format.md shows: every ```json block that starts with a trace header replays through
// `kvshard replay -` with no mismatch, so an example a user copies out of the doc runs; a block marked
// `<!-- trace: FILE -->` is that file, byte for byte.
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/cli_test_util.h"

namespace kvshard::cli {
namespace {

// A trace block of the doc: its first line's number, its text, and the file it claims to be ("" when none).
struct DocTrace {
  int line = 0;
  std::string text, file;
};

std::vector<DocTrace> TraceBlocks(const std::string& doc) {
  std::vector<DocTrace> blocks;
  const std::string fence = "```json\n", header = "{\"kvshard_trace\"", marker = "<!-- trace: ";
  for (size_t at = doc.find(fence); at != std::string::npos; at = doc.find(fence, at + 1)) {
    const size_t begin = at + fence.size(), end = doc.find("```", begin);
    if (end == std::string::npos || doc.compare(begin, header.size(), header) != 0) continue;
    DocTrace t;
    t.line = 1 + static_cast<int>(std::count(doc.begin(), doc.begin() + static_cast<std::ptrdiff_t>(begin), '\n'));
    t.text = doc.substr(begin, end - begin);
    // The line before the fence (none when the fence opens the doc).
    const size_t line_start = at < 2 ? at : doc.rfind('\n', at - 2) + 1;
    if (doc.compare(line_start, marker.size(), marker) == 0) {
      const size_t name = line_start + marker.size();
      t.file = doc.substr(name, doc.find(" -->", name) - name);
    }
    blocks.push_back(t);
  }
  return blocks;
}

TEST(DocTracesTest, EveryTraceInTraceFormatReplaysClean) {
  const std::string doc = ReadRunfile("docs/trace-format.md");
  ASSERT_FALSE(doc.empty()) << "docs/trace-format.md not in the runfiles";
  const std::vector<DocTrace> blocks = TraceBlocks(doc);
  ASSERT_GE(blocks.size(), 5u) << "the doc's trace examples were not found";
  int files = 0;
  for (const DocTrace& t : blocks) {
    const CliResult r = RunCli({"replay", "-"}, t.text);
    EXPECT_EQ(r.exit_code, 0) << "docs/trace-format.md line " << t.line << ": " << r.err << r.out;
    EXPECT_NE(r.out.find(" 0 mismatches"), std::string::npos) << "line " << t.line << ": " << r.out;
    if (!t.file.empty()) {
      ++files;
      EXPECT_EQ(t.text, ReadRunfile(t.file)) << "docs/trace-format.md line " << t.line << " is not " << t.file;
    }
  }
  EXPECT_GE(files, 1);
}

}  // namespace
}  // namespace kvshard::cli
