// The served model as the prefill node sees it: layers, KV bytes per token and layer (MLA's latent row or GQA's
// K and V heads), weight bytes, active parameters and attention FLOPs for the cost model, and the context. Presets
// for the models planners ask about, or a JSON file of the same fields (docs/simulate.md, "The model").
#ifndef KVSHARD_SIM_MODEL_H_
#define KVSHARD_SIM_MODEL_H_

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/status.h"

namespace kvshard::sim {

struct SimConfig;

// One model's serving-relevant shape.
struct ModelSpec {
  std::string name;
  int64_t layers = 0;
  int64_t kv_bytes_per_token_layer = 0;       // bf16: MLA (kv_lora_rank + rope dim) * 2; GQA kv_heads * dim * 2 * 2
  int64_t weight_bytes = 0;                   // the whole model's weights as served (FP8: 1 B a parameter)
  double active_params = 0;                   // parameters a token passes through (MoE: the activated ones)
  double attention_flops_per_pair_layer = 0;  // q.k and p.v FLOPs of one (query, key) pair in one layer
  int64_t context_length = 0;
  std::string source;  // where the numbers come from
};

// The built-in presets, in the order `--model` lists them.
const std::vector<ModelSpec>& ModelPresets();

// The preset named `name` (or an alias: kimi-k2 is its own preset), or InvalidArgument listing the names.
StatusOr<ModelSpec> FindModelPreset(const std::string& name);

// A model from JSON: {"name", "layers", "kv_bytes_per_token_layer", "weight_bytes", "active_params",
// "attention_flops_per_pair_layer", "context_length"}; errors name the field.
StatusOr<ModelSpec> ReadModelSpec(std::istream& in);

// Sets the configuration's model fields (layers, KV bytes, context, weights, the cost model's FLOPs) from `m`.
void ApplyModel(const ModelSpec& m, SimConfig* config);

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_MODEL_H_
