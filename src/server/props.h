// GET /props (llama-server's shape): the defaults a request gets for what it leaves out, the
// slots, the model's path and names, its chat template, the context, the build. A pure
// function of what the server knows; the defaults are parse_request's, so they cannot drift
// from what requests actually get.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_renderer.h"
#include "engine/generation_service.h"
#include "engine/speculation/speculation_params.h"

namespace tandem::server {

struct ServerProps {
  std::vector<std::string> model_names;  // [0]: the id
  std::string model_path;
  const chat::ChatRenderer* chat_renderer = nullptr;
  int64_t context_length = 0;  // per sequence
  int32_t total_slots = 0;     // --parallel
  SpeculationParams speculation;
};

// {"default_generation_settings": {"n_ctx", "params": {temperature, top_k, ...}},
//  "total_slots", "model_path", "model_alias", "served_model_names", "chat_template",
//  "chat_format", "bos_token", "eos_token", "n_ctx", "build_info", "version", "commit"}
nlohmann::json props_json(const ServerProps& props);

// "tandem 0.1.0 (commit 1a2b3c4d5e6f)": version_line() (base/build_info.h).
std::string build_info();

}  // namespace tandem::server
