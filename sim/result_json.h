// kvshard simulate --json: a run's result and configuration as one JSON object; every sweep row carries its keys.
#ifndef KVSHARD_SIM_RESULT_JSON_H_
#define KVSHARD_SIM_RESULT_JSON_H_

#include "core/json.h"
#include "sim/simulator.h"

namespace kvshard::sim {

// Whether KV sharding and CP shared-KV direct writes ran together: no page failed the owner check and SGLang's
// gather accepted every batch's prefix (docs/simulate.md, "CP shared-KV direct writes").
bool RunTogether(const SimResult& r);

// The "direct_write" object (cp_size > 1): the CP shared-KV direct-write figures.
Json DirectWriteJson(const SimResult& r, const SimConfig& c);

// The "config" object: the node's settings, SGLang's names where SGLang has them.
Json ConfigJson(const SimConfig& c);

// The single run's --json object: requests, hit rates, pages, deferrals, gathered bytes, batch times, config.
Json ResultJson(const SimResult& r, const SimConfig& c);

}  // namespace kvshard::sim

#endif  // KVSHARD_SIM_RESULT_JSON_H_
