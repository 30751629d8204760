// The bounded in-memory store of /v1/responses (see responses_store.h).
#include "server/responses_store.h"

namespace tandem::server {

size_t StoredResponse::bytes() const {
  // The strings dominate; the per-object overhead is counted as a flat amount so that many
  // tiny messages still add up.
  constexpr size_t kOverhead = 64;
  size_t total = kOverhead + output.dump().size() + response.dump().size();
  for (const chat::ChatMessage& m : conversation) {
    total += kOverhead + m.role.size() + m.content.size() + m.name.size() + m.tool_call_id.size();
    for (const chat::ToolCall& call : m.tool_calls)
      total += kOverhead + call.id.size() + call.name.size() + call.arguments.size();
  }
  return total;
}

bool ResponsesStore::put(const std::string& id, StoredResponse response) {
  const size_t size = response.bytes() + id.size();
  if (max_responses_ == 0 || size > max_bytes_) return false;
  std::lock_guard lock(mutex_);
  if (const auto it = entries_.find(id); it != entries_.end()) {  // ids are random: cannot happen, but stay exact
    bytes_ -= it->second.bytes;
    entries_.erase(it);
    std::erase(order_, id);
  }
  while (!order_.empty() && (entries_.size() + 1 > max_responses_ || bytes_ + size > max_bytes_)) {
    const auto oldest = entries_.find(order_.front());
    bytes_ -= oldest->second.bytes;
    entries_.erase(oldest);
    order_.pop_front();
  }
  entries_.emplace(id, Entry{std::move(response), size});
  order_.push_back(id);
  bytes_ += size;
  return true;
}

std::optional<StoredResponse> ResponsesStore::get(const std::string& id) const {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.response;
}

bool ResponsesStore::erase(const std::string& id) {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  bytes_ -= it->second.bytes;
  entries_.erase(it);
  std::erase(order_, id);
  return true;
}

std::optional<nlohmann::json> ResponsesStore::find_item(const std::string& item_id) const {
  std::lock_guard lock(mutex_);
  // Newest first: a client refers back to the turns it just had.
  for (auto id = order_.rbegin(); id != order_.rend(); ++id)
    for (const nlohmann::json& item : entries_.at(*id).response.output)
      if (item.value("id", "") == item_id) return item;
  return std::nullopt;
}

size_t ResponsesStore::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

size_t ResponsesStore::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

}  // namespace tandem::server
