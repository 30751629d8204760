// Log line formatting (see request_log.h).
#include "server/request_log.h"

#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tandem::server {
namespace {

// "2026-12-03T07:48:27.123Z"
std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
}

// Milliseconds to 0.1 ms: enough to read, short enough to scan.
double rounded(double ms) { return static_cast<double>(static_cast<int64_t>(ms * 10.0 + 0.5)) / 10.0; }

// A client's path in a text line: no spaces or control bytes that would split or forge a line.
std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    out += byte <= 0x20 || byte == 0x7f ? fmt::format("%{:02X}", byte) : std::string(1, c);
  }
  return out;
}

std::string json_line(const nlohmann::ordered_json& object) {
  return object.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

std::optional<LogFormat> log_format_from_name(std::string_view name) {
  if (name == "text") return LogFormat::Text;
  if (name == "json") return LogFormat::Json;
  return std::nullopt;
}

std::string request_log_line(const RequestLogEntry& e, LogFormat format) {
  if (format == LogFormat::Json) {
    nlohmann::ordered_json line = {
        {"time", utc_now()},  {"level", "info"}, {"event", "request"}, {"id", e.id},
        {"method", e.method}, {"path", e.path},  {"status", e.status}, {"total_ms", rounded(e.total_ms)}};
    if (e.generation) {
      line["choices"] = e.choices;
      line["prompt_tokens"] = e.prompt_tokens;
      line["cached_tokens"] = e.cached_tokens;
      line["completion_tokens"] = e.completion_tokens;
      line["queue_ms"] = rounded(e.queue_ms);
      line["ttft_ms"] = rounded(e.ttft_ms);
      line["finish_reason"] = e.finish_reason;
    }
    if (!e.error.empty()) line["error"] = e.error;
    return json_line(line);
  }
  std::string line = fmt::format("tandem serve: request {} {} {} {}", e.id, e.method, printable(e.path), e.status);
  if (e.generation) {
    if (e.choices != 1) line += fmt::format(" n={}", e.choices);
    line += fmt::format(" prompt={} cached={} generated={} queue_ms={} ttft_ms={}", e.prompt_tokens, e.cached_tokens,
                        e.completion_tokens, rounded(e.queue_ms), rounded(e.ttft_ms));
  }
  line += fmt::format(" total_ms={}", rounded(e.total_ms));
  if (e.generation && !e.finish_reason.empty()) line += " finish=" + e.finish_reason;
  if (!e.error.empty())
    line += " error=" + nlohmann::json(e.error).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return line + "\n";
}

std::string log_message_line(std::string_view level, std::string_view message, LogFormat format) {
  if (format == LogFormat::Json)
    return json_line(nlohmann::ordered_json{{"time", utc_now()}, {"level", level}, {"message", message}});
  const bool plain = level == "info" || level == "debug";
  return fmt::format("tandem serve: {}{}{}\n", plain ? "" : level, plain ? "" : ": ", message);
}

}  // namespace tandem::server
