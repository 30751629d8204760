// ResponsesStore: the responses /v1/responses keeps for `previous_response_id` (requests
// with `store` true, OpenAI's default), in memory only, under an explicit bound on their
// number and on their bytes: past either, the oldest are forgotten first, and a later request
// naming one is told so (404). Each entry holds the whole conversation up to and including
// that response (instructions excepted: OpenAI does not carry them over), so a conversation
// never depends on an older entry that may have been evicted. Thread-safe: requests are
// prepared on the worker pool and stored from the I/O thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_message.h"

namespace tandem::server {

struct StoredResponse {
  // The conversation so far: the earlier turns, this request's input, this response's output.
  std::vector<chat::ChatMessage> conversation;
  // The output items (the response object's "output"), for `item_reference` inputs.
  nlohmann::json output = nlohmann::json::array();
  // The response object as it was answered (GET /v1/responses/{id}).
  nlohmann::json response = nullptr;
  // An estimate of the memory it holds, counted against the byte bound.
  size_t bytes() const;
};

class ResponsesStore {
 public:
  ResponsesStore(size_t max_responses, size_t max_bytes) : max_responses_(max_responses), max_bytes_(max_bytes) {}

  // Keeps `response` under `id`, evicting the oldest entries while either bound is passed.
  // A response larger than the byte bound by itself is not kept (false); nor is any when
  // max_responses is 0.
  bool put(const std::string& id, StoredResponse response);
  // A copy of the entry, or nullopt when unknown or evicted.
  std::optional<StoredResponse> get(const std::string& id) const;
  // Forgets the entry (DELETE /v1/responses/{id}); false when there was none.
  bool erase(const std::string& id);
  // The output item with this id ("msg_...", "fc_...") of a stored response, or nullopt.
  std::optional<nlohmann::json> find_item(const std::string& item_id) const;

  size_t size() const;
  size_t bytes() const;
  size_t max_responses() const { return max_responses_; }
  size_t max_bytes() const { return max_bytes_; }

 private:
  struct Entry {
    StoredResponse response;
    size_t bytes = 0;
  };
  const size_t max_responses_;
  const size_t max_bytes_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
  std::deque<std::string> order_;  // oldest first
  size_t bytes_ = 0;
};

}  // namespace tandem::server
