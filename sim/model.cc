// Model presets and model files (sim/model.h). The numbers are the models' published configurations
// (config.json on their Hugging Face pages) turned into bytes: bf16 KV, FP8 weights for the models served in FP8.
#include "sim/model.h"

#include <istream>
#include <iterator>

#include "core/json.h"
#include "sim/simulator.h"

namespace kvshard::sim {

const std::vector<ModelSpec>& ModelPresets() {
  // MLA: kv_lora_rank 512 + qk_rope_head_dim 64 = 576 bf16 values a token and layer; attention per pair and
  // layer 2 * 128 heads * (192 + 128) FLOPs (q.k over the 192-dim nope+rope head, p.v over the 128-dim value).
  // GQA: kv_heads * head_dim * 2 (K, V) * 2 bytes; attention 2 * 2 * q_heads * head_dim.
  static const auto* presets = new std::vector<ModelSpec>{
      {"deepseek-v3", 61, 1152, 671'000'000'000, 37e9, 2.0 * 128 * (192 + 128), 163840,
       "DeepSeek-V3: 61 layers, MLA 512+64, 671 B parameters in FP8 (37 B active), context 163,840"},
      {"kimi-k2", 61, 1152, 1'040'000'000'000, 32e9, 2.0 * 64 * (192 + 128), 131072,
       "Kimi K2: 61 layers, MLA 512+64 with 64 heads, 1.04 T parameters in FP8 (32 B active), context 131,072"},
      {"llama-3-70b", 80, 8 * 128 * 2 * 2, 141'000'000'000, 70.6e9, 2.0 * 2 * 64 * 128, 131072,
       "Llama-3.1-70B: 80 layers, GQA 8 KV heads x 128, 70.6 B parameters in bf16, context 131,072"},
      {"qwen3-235b", 94, 4 * 128 * 2 * 2, 470'000'000'000, 22e9, 2.0 * 2 * 64 * 128, 131072,
       "Qwen3-235B-A22B: 94 layers, GQA 4 KV heads x 128, 235 B parameters in bf16 (22 B active), context "
       "131,072 (YaRN)"},
  };
  return *presets;
}

StatusOr<ModelSpec> FindModelPreset(const std::string& name) {
  std::string names;
  for (const ModelSpec& m : ModelPresets()) {
    if (m.name == name) return m;
    names += (names.empty() ? "" : ", ") + m.name;
  }
  return InvalidArgument("model: unknown preset ", QuoteInput(name), " (presets: ", names, "; or a JSON file)");
}

StatusOr<ModelSpec> ReadModelSpec(std::istream& in) {
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("not a JSON object");
  for (const auto& [key, value] : j.items()) {
    static const char* kKnown[] = {"name",          "layers",        "kv_bytes_per_token_layer",
                                   "weight_bytes",  "active_params", "attention_flops_per_pair_layer",
                                   "context_length"};
    bool known = false;
    for (const char* k : kKnown) known |= key == k;
    if (!known) return InvalidArgument(QuoteInput(key, '\0'), ": unknown field");
    (void)value;
  }
  ModelSpec m;
  if (!j.contains("name") || !j.at("name").is_string()) return InvalidArgument("name: must be a string");
  m.name = j.at("name").get<std::string>();
  KVSHARD_ASSIGN_OR_RETURN(m.layers, JsonInt(j, "layers", "", 1, 4096));
  KVSHARD_ASSIGN_OR_RETURN(m.kv_bytes_per_token_layer, JsonInt(j, "kv_bytes_per_token_layer", "", 1, 1 << 24));
  KVSHARD_ASSIGN_OR_RETURN(m.weight_bytes, JsonInt(j, "weight_bytes", "", 0, int64_t{1} << 50));
  KVSHARD_ASSIGN_OR_RETURN(m.context_length, JsonInt(j, "context_length", "", 1, int64_t{1} << 40));
  for (const auto& [key, out] : {std::pair<const char*, double*>{"active_params", &m.active_params},
                                 {"attention_flops_per_pair_layer", &m.attention_flops_per_pair_layer}}) {
    if (!j.contains(key) || !j.at(key).is_number() || !(j.at(key).get<double>() > 0) ||
        !(j.at(key).get<double>() < 1e15)) {
      return InvalidArgument(key, ": must be a number in (0, 1e15)");
    }
    *out = j.at(key).get<double>();
  }
  m.source = "model file";
  return m;
}

void ApplyModel(const ModelSpec& m, SimConfig* c) {
  c->model_name = m.name;
  c->cost.layers = m.layers;
  c->kv_bytes_per_token_layer = m.kv_bytes_per_token_layer;
  c->context_length = m.context_length;
  c->weight_bytes = m.weight_bytes;
  c->cost.flops_per_token_layer = 2.0 * m.active_params / static_cast<double>(m.layers);
  c->cost.attention_flops_per_pair_layer = m.attention_flops_per_pair_layer;
}

}  // namespace kvshard::sim
