// Served model names (see model_names.h): parsing the flag, matching a request's `model`,
// and the 404 OpenAI answers for a model it does not have.
#include "server/model_names.h"

#include <algorithm>

#include "base/error.h"
#include "server/openai_protocol.h"

namespace tandem::server {

std::vector<std::string> parse_served_model_names(const std::vector<std::string>& values) {
  std::vector<std::string> names;
  for (const std::string& value : values) {
    for (size_t start = 0;;) {
      const size_t comma = value.find(',', start);
      const std::string name = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      TANDEM_CHECK_INPUT(!name.empty(), "--served-model-name: empty name in '{}'", value);
      TANDEM_CHECK_INPUT(std::none_of(name.begin(), name.end(),
                                      [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }),
                         "--served-model-name: a name may not hold control characters");
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return names;
}

bool model_name_accepted(const std::vector<std::string>& names, std::string_view requested) {
  return requested.empty() || std::find(names.begin(), names.end(), requested) != names.end();
}

void check_model_name(const std::vector<std::string>& names, std::string_view requested) {
  if (!model_name_accepted(names, requested))
    throw ApiError(404, "invalid_request_error", model_not_found_message(names, requested), {},
                   ErrorCode::ModelNotFound);
}

std::string model_not_found_message(const std::vector<std::string>& names, std::string_view requested) {
  std::string listed;
  for (const std::string& name : names) listed += (listed.empty() ? "'" : ", '") + name + "'";
  return fmt::format("The model '{}' does not exist (this server serves {})", requested.substr(0, 200), listed);
}

std::string model_id_from_target(std::string_view target) {
  constexpr std::string_view kPrefix = "/v1/models/";
  target = target.substr(0, target.find('?'));
  if (!target.starts_with(kPrefix)) return {};
  target.remove_prefix(kPrefix.size());
  const auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string id;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == '%' && i + 2 < target.size() && hex(target[i + 1]) >= 0 && hex(target[i + 2]) >= 0) {
      id += static_cast<char>(hex(target[i + 1]) * 16 + hex(target[i + 2]));
      i += 2;
    } else {
      id += target[i];
    }
  }
  return id;
}

std::optional<std::string_view> openai_error_code(int status, std::string_view type) {
  if (status == 404 && type == "invalid_request_error") return "model_not_found";
  return std::nullopt;
}

nlohmann::json model_json(std::string_view id, int64_t context_length) {
  return {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "tandem"}, {"max_model_len", context_length}};
}

}  // namespace tandem::server
