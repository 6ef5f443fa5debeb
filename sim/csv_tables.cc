// CSV rows with fixed precision: seconds to the microsecond, per-phase times to the nanosecond.
#include "sim/csv_tables.h"

#include <cstdio>
#include <string>

namespace kvshard::sim {

const char kRequestsCsvHeader[] =
    "request_id,arrived_at,scheduled_at,prefill_completed_at,completed_at,num_prefill_tokens,num_decode_tokens,"
    "cached_tokens,num_chunks,ttft,e2e_time,rotation_base";
const char kBatchesCsvHeader[] =
    "batch_id,start,end,num_requests,num_prefill_tokens,compute_tokens,cp_padding_tokens,prefix_pages,"
    "gathered_bytes_per_layer,plan_us,gather_us,pack_us,stage_us,compute_us,rerange_us,total_us,pages_in_use_min,"
    "pages_in_use_max,pages_in_use_mean,deferrals,evicted_pages,prefix_hit_rate_tokens";

namespace {

// Seconds from microseconds ("" for a negative time: never happened).
std::string Sec(double us) {
  if (us < 0) return "";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.6f", us / 1e6);
  return buf;
}

std::string Fixed(double x, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, x);
  return buf;
}

Status Done(std::ostream& out) {
  out.flush();
  return out ? Status::Ok() : Internal("write failed");
}

}  // namespace

Status WriteRequestsCsv(const SimRecord& rec, std::ostream& out) {
  out << kRequestsCsvHeader << "\n";
  for (const RequestRow& r : rec.requests) {
    const bool prefilled = r.prefill_completed_us >= 0, completed = r.completed_us >= 0;
    out << r.request_id << ',' << Sec(r.arrived_us) << ',' << Sec(r.scheduled_us) << ',' << Sec(r.prefill_completed_us)
        << ',' << Sec(r.completed_us) << ',' << r.prefill_tokens << ',' << r.decode_tokens << ',' << r.cached_tokens
        << ',' << r.chunks << ',' << (prefilled ? Sec(r.prefill_completed_us - r.arrived_us) : "") << ','
        << (completed ? Sec(r.completed_us - r.arrived_us) : "") << ',' << r.rotation_base << '\n';
  }
  return Done(out);
}

Status WriteBatchesCsv(const SimRecord& rec, std::ostream& out) {
  out << kBatchesCsvHeader << "\n";
  for (const BatchRow& b : rec.batches) {
    const double hit = b.matched_prompt_tokens ? static_cast<double>(b.cached_tokens) / b.matched_prompt_tokens : 0;
    out << b.batch_id << ',' << Sec(b.start_us) << ',' << Sec(b.end_us) << ',' << b.requests << ',' << b.prefill_tokens
        << ',' << b.compute_tokens << ',' << b.cp_padding_tokens << ',' << b.prefix_pages << ','
        << b.gathered_bytes_layer << ',' << Fixed(b.plan_us, 3) << ',' << Fixed(b.gather_us, 3) << ','
        << Fixed(b.pack_us, 3) << ',' << Fixed(b.stage_us, 3) << ',' << Fixed(b.compute_us, 3) << ','
        << Fixed(b.rerange_us, 3) << ',' << Fixed(b.total_us, 3) << ',' << b.pages_in_use_min << ','
        << b.pages_in_use_max << ',' << Fixed(b.pages_in_use_mean, 3) << ',' << b.deferrals << ',' << b.evicted_pages
        << ',' << Fixed(hit, 6) << '\n';
  }
  return Done(out);
}

Status WriteRankPagesCsv(const SimRecord& rec, std::ostream& out) {
  out << "batch_id,end";
  for (int64_t r = 0; r < rec.ranks_recorded; ++r) out << ",rank_" << r;
  out << '\n';
  for (size_t i = 0; i < rec.batches.size(); ++i) {
    if ((i + 1) * static_cast<size_t>(rec.ranks_recorded) > rec.rank_pages.size()) break;
    out << rec.batches[i].batch_id << ',' << Sec(rec.batches[i].end_us);
    for (int64_t r = 0; r < rec.ranks_recorded; ++r) out << ',' << rec.RankPages(i, r);
    out << '\n';
  }
  return Done(out);
}

}  // namespace kvshard::sim
