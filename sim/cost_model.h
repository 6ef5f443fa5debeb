// The simulator's per-batch time model: each phase of a sharded extend batch (host plan, send-block pack, the
// layer-ahead all-gather, chunk staging, attention/MLP compute, CP rerange) as latency + work / rate, with
// the rates taken from physical limits (inputs, docs/simulate.md) or fitted to measurements (sim/calibration.h).
#ifndef KVSHARD_SIM_COST_MODEL_H_
#define KVSHARD_SIM_COST_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>

namespace kvshard::sim {

// What one extend batch does, as the model sees it.
struct BatchWork {
  int64_t requests = 0;
  int64_t extend_tokens = 0;         // new tokens computed (all ranks together, CP padding excluded)
  int64_t compute_tokens = 0;        // tokens computed including CP compute padding
  int64_t context_tokens = 0;        // sum over requests of prefix + extend (attention context)
  int64_t attention_pairs = 0;       // (query, key) pairs: Σ extend · (prefix + (extend + 1) / 2), causal
  int64_t prefix_pages = 0;          // distinct prefix pages gathered
  int64_t gathered_bytes_layer = 0;  // all-gather output bytes per rank per layer (N * block_pages * ps * row)
  int64_t staged_bytes_layer = 0;    // chunk rows staged per rank per layer
  int64_t rerange_bytes_layer = 0;   // CP rerange output bytes per layer (0 without CP)
};

// Phase times of one batch, microseconds (per-layer phases summed over layers).
struct BatchTime {
  double plan_us = 0, gather_us = 0, stage_us = 0, compute_us = 0, rerange_us = 0;
  double pack_us = 0, allgather_us = 0;  // gather_us = pack_us + allgather_us
  // The batch's critical path: plan, then per layer max(compute, gather of the next layer) + staging + rerange.
  double total_us = 0;
};

// time_us = latency_us + us_per_unit * x (x in the operation's unit); with a knee > 0 the cost per unit
// changes there (e.g. payloads that stay in L2 below it): us_per_unit up to the knee, us_per_unit_above after.
struct LinearTime {
  double latency_us = 0, us_per_unit = 0;
  double knee = 0, us_per_unit_above = 0;
  double At(double x) const {
    if (knee <= 0 || x <= knee) return latency_us + us_per_unit * x;
    return latency_us + us_per_unit * knee + us_per_unit_above * (x - knee);
  }
};

// Linear phase models: physical rates, each replaceable by a fitted LinearTime.
struct CostModel {
  std::string source = "physical limits (uncalibrated)";
  int64_t layers = 61;  // model layers (DeepSeek-V3/Kimi K2: 61)
  double plan_latency_us = 5, plan_us_per_page = 0.002;
  double hbm_bytes_per_us = 4.8e6;                 // H200 HBM3e, 4.8 TB/s (NVIDIA H200 datasheet)
  double nvlink_bytes_per_us = 450e3;              // all-gather bus bandwidth: NVLink 4, 450 GB/s per direction per GPU
  double collective_latency_us = 10;               // NCCL all-gather launch and sync, small messages
  double flops_per_us = 989e6 * 0.4;               // H200 dense BF16 989 TFLOP/s at 40 % model FLOPs utilisation
  double flops_per_token_layer = 2.0 * 37e9 / 61;  // 2 x active params (37 B, DeepSeek-V3) per layer
  // q.k over 192 dims and p.v over 128 dims, 2 FLOPs per multiply-add, 128 heads (MLA, DeepSeek-V3).
  double attention_flops_per_pair_layer = 2.0 * 128 * (192 + 128);

  // Fitted operation times (sim/calibration.h); unset, the physical rates above are used.
  std::optional<LinearTime> plan_fit;       // x = prefix page references
  std::optional<LinearTime> pack_fit;       // x = send-block bytes per rank
  std::optional<LinearTime> stage_fit;      // x = staged chunk bytes
  std::optional<LinearTime> rerange_fit;    // x = rerange output bytes
  std::optional<LinearTime> dense_fit;      // x = dense (GEMM) FLOPs per rank
  std::optional<LinearTime> attention_fit;  // x = attention FLOPs per rank

  // The time of one batch on one rank (ranks run in lockstep; the N shard ranks split the FLOPs as tensor
  // parallelism does, CP ranks split the tokens).
  BatchTime Predict(const BatchWork& work, int64_t shard_size, int64_t cp_size) const;
};

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_COST_MODEL_H_
