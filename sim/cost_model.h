// The simulator's per-batch time model: each phase of a sharded extend batch (host plan, send-block pack, the
// layer-ahead all-gather, chunk staging, attention/MLP compute, CP rerange) as latency + work / rate, with
// the rates taken from physical limits (inputs, docs/simulate.md) until a calibration file replaces them.
#ifndef KVSHARD_SIM_COST_MODEL_H_
#define KVSHARD_SIM_COST_MODEL_H_

#include <cstdint>
#include <string>

namespace kvshard::sim {

// What one extend batch does, as the model sees it.
struct BatchWork {
  int64_t requests = 0;
  int64_t extend_tokens = 0;         // new tokens computed (all ranks together, CP padding excluded)
  int64_t compute_tokens = 0;        // tokens computed including CP compute padding
  int64_t context_tokens = 0;        // sum over requests of prefix + extend (attention context)
  int64_t prefix_pages = 0;          // distinct prefix pages gathered
  int64_t gathered_bytes_layer = 0;  // all-gather output bytes per rank per layer (N * block_pages * ps * row)
  int64_t staged_bytes_layer = 0;    // chunk rows staged per rank per layer
  int64_t rerange_bytes_layer = 0;   // CP rerange output bytes per layer (0 without CP)
};

// Phase times of one batch, microseconds.
struct BatchTime {
  double plan_us = 0, gather_us = 0, stage_us = 0, compute_us = 0, rerange_us = 0;
  // The batch's critical path: plan, then per layer max(compute, gather of the next layer) + staging + rerange.
  double total_us = 0;
};

// Linear phase models, one per phase: t = latency_us + work / rate.
struct CostModel {
  std::string source = "physical limits (uncalibrated)";
  int64_t layers = 61;                   // model layers (DeepSeek-V3/Kimi K2: 61)
  double plan_latency_us = 5, plan_us_per_page = 0.002;
  double hbm_bytes_per_us = 4.8e6;       // H200 HBM3e, 4.8 TB/s (NVIDIA H200 datasheet)
  double nvlink_bytes_per_us = 450e3;    // NVLink 4, 450 GB/s per direction per GPU (900 GB/s total)
  double collective_latency_us = 10;     // NCCL all-gather launch and sync, small messages
  double flops_per_us = 989e6 * 0.4;     // H200 dense BF16 989 TFLOP/s at 40 % model FLOPs utilisation
  double flops_per_token_layer = 2.0 * 37e9 / 61;  // 2 x active params (37 B, DeepSeek-V3) per layer
  double attention_flops_per_context_token_layer = 4.0 * 128 * 192;  // q.k and p.v over 128 heads x 192 dims

  // The time of one batch on one rank (ranks run in lockstep; the N shard ranks split the FLOPs as tensor
  // parallelism does, CP ranks split the tokens).
  BatchTime Predict(const BatchWork& work, int64_t shard_size, int64_t cp_size) const;
};

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_COST_MODEL_H_
