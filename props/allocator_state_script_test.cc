// Allocator scripts (core/alloc_script.h) against the fast allocator: a script built from the state property's
// commands survives the JSON round trip, and RunAllocScript's results equal cpu_fast/'s on the same ops.
#include <algorithm>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/pool_json.h"
#include "cpu_fast/allocator.h"
#include "cpu_ref/allocator.h"
#include "props/allocator_state_model.h"
#include "props/property.h"
#include "props/rc_status.h"

namespace kvshard::props::allocator_state {
namespace {

// Scripts survive the JSON round trip, and RunAllocScript's per-op results equal those of the fast allocator
// (cpu_fast/, an independent implementation) driven by the same ops, sizes as spec'd from its class counts.
KVSHARD_PROP(AllocatorProps, ScriptJsonRoundTripAndResultsMatchFastAllocator, ()) {
  AllocScript s;
  s.shard_size = *rc::gen::inRange<int64_t>(1, 9);
  s.page_size = *rc::gen::element<int64_t>(1, 2, 16);
  s.pages_per_rank = *rc::gen::inRange<int64_t>(0, 9);
  s.need_sort = *rc::gen::arbitrary<bool>();
  Model m(s.shard_size, s.page_size, s.pages_per_rank, s.need_sort);
  fast::PageInterleaveAllocator f = RC_VALUE(fast::PageInterleaveAllocator::Create(
      {s.shard_size, s.page_size, s.pages_per_rank, s.need_sort, s.check_last_loc}));
  std::vector<AllocOpResult> want;
  const int64_t ops = *rc::gen::inRange<int64_t>(0, 8);
  for (int64_t k = 0; k < ops; ++k) {
    AllocOp op;
    if (m.chains.empty() || *rc::gen::arbitrary<bool>()) {
      const Alloc cmd(m);
      op.alloc = cmd.batch;
      AllocOpResult r;
      fast::ExtendPages out;
      r.ok = RC_VALUE(f.AllocExtend(op.alloc, &out));
      if (r.ok) {
        r.rotation_bases = out.rotation_bases;
        for (size_t i = 0; i + 1 < out.offsets.size(); ++i) {
          r.pages.emplace_back(out.pages.begin() + out.offsets[i], out.pages.begin() + out.offsets[i + 1]);
        }
      }
      cmd.apply(m);
      want.push_back(r);
    } else {
      op.kind = *rc::gen::arbitrary<bool>() ? AllocOpKind::kFree : AllocOpKind::kFreeGroup;
      const Chain c = m.chains.back();
      m.chains.pop_back();
      const V locs = ChainSlots(c, 0, c.len, m.ps);
      if (op.kind == AllocOpKind::kFree) {
        op.locs = locs;
      } else {
        op.frees = {V(locs.begin(), locs.begin() + locs.size() / 2), V(locs.begin() + locs.size() / 2, locs.end())};
      }
      if (op.kind == AllocOpKind::kFree) {
        m.Free(op.locs);
        RC_ASSERT_OK(f.Free(op.locs));
      } else {
        m.FreeGroup(op.frees);
        RC_ASSERT_OK(f.FreeGroup(op.frees));
      }
      AllocOpResult r;
      r.kind = op.kind;
      want.push_back(r);
    }
    AllocOpResult& r = want.back();
    r.class_free_page_counts = f.class_free_page_counts();
    r.available_size = m.n * m.ps * *std::min_element(r.class_free_page_counts.begin(), r.class_free_page_counts.end());
    r.aggregate_free_size =
        m.ps * std::accumulate(r.class_free_page_counts.begin(), r.class_free_page_counts.end(), int64_t{0});
    s.ops.push_back(op);
  }
  RC_LOG() << "script: " << AllocScriptToJson(s).dump() << "\n";
  const AllocScript back = RC_VALUE(AllocScriptFromJson(AllocScriptToJson(s)));
  RC_ASSERT(back == s);
  RC_ASSERT(RC_VALUE(ref::RunAllocScript(back)) == want);
}

}  // namespace
}  // namespace kvshard::props::allocator_state
