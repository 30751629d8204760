// The chat-only fields of an OpenAI request: messages (roles system, developer, user,
// assistant, tool; text content or text parts; assistant tool_calls; tool results with
// tool_call_id), tools (function definitions), tool_choice and parallel_tool_calls. Shapes
// are checked strictly, each error a 400 naming the field ("messages[2].tool_calls[0].
// function.arguments") and quoting the value; what is valid is rendered by src/chat/.
#pragma once

#include "server/request_json.h"

namespace tandem::server {

// Fills request.messages, tools, tool_choice and parallel_tool_calls from `body`.
void parse_chat_fields(const RequestJson& body, ApiRequest& request);

}  // namespace tandem::server
