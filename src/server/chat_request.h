// The chat-only fields of an OpenAI request: messages (roles system, developer, user,
// assistant, tool; text content or text parts; assistant tool_calls; tool results with
// tool_call_id), tools (function definitions), tool_choice and parallel_tool_calls. Shapes
// are checked strictly, each error a 400 naming the field ("messages[2].tool_calls[0].
// function.arguments") and quoting the value; what is valid is rendered by src/chat/. Also how
// the prompt ends (prefill) and the template's extra variables.
#pragma once

#include "server/request_json.h"

namespace tandem::server {

// Fills request.messages, tools, tool_choice, parallel_tool_calls and render from `body`.
void parse_chat_fields(const RequestJson& body, ApiRequest& request);

// How the conversation ends and what the template sees: add_generation_prompt (default
// true), continue_final_message (vLLM's; absent, true when the last message is the
// assistant's, as llama-server prefills — unless that message calls tools), and
// chat_template_kwargs (an object; the renderer's own variables refused). 400 for a wrong
// type, continuing a message that is not the assistant's, or both flags true.
chat::RenderOptions parse_render_options(const RequestJson& body, const std::vector<ChatMessage>& messages);

// --chat-template-kwargs JSON: an object (checked as a request's is), or InputError in one line.
nlohmann::ordered_json parse_template_kwargs_flag(std::string_view text);

// --chat-template-kwargs under a request's chat_template_kwargs: the request's keys win.
nlohmann::ordered_json merge_template_kwargs(const nlohmann::ordered_json& server_kwargs,
                                             const nlohmann::ordered_json& request_kwargs);

}  // namespace tandem::server
