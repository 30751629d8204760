// /v1/responses bodies -> chat requests, and replies -> response objects and stream events
// (see responses_api.h). The body is checked here in the Responses API's own terms (paths
// like "input[2].content[0].type"), then the fields the chat path shares (tools, tool_choice,
// sampling, response_format) go through parse_request as a chat body, so both endpoints
// validate, render and constrain alike.
#include "server/responses_api.h"

#include <algorithm>
#include <random>
#include <set>

#include "server/json_body.h"
#include "server/request_json.h"

namespace tandem::server {

using nlohmann::json;

namespace {

std::string index_path(std::string_view path, size_t index) { return fmt::format("{}[{}]", path, index); }

const RequestJson& require_object(const RequestJson& value, const std::string& path, std::string_view shape) {
  if (!value.is_object()) bad(fmt::format("'{}' must be {}, not {}", path, shape, shown(value)));
  return value;
}

std::string string_of(const RequestJson& object, const char* key, const std::string& path, bool required) {
  const RequestJson* v = field(object, key);
  if (!v) {
    if (required) bad(fmt::format("'{}.{}' is required (a string)", path, key));
    return {};
  }
  if (!v->is_string())
    bad(fmt::format("'{}.{}' must be a string, not {}", path, key, shown(*v)), ErrorCode::InvalidType);
  return v->get<std::string>();
}

// Fields read here or passed on to the chat parser, and fields refused with why.
constexpr std::string_view kResponsesFields[] = {"model",
                                                 "input",
                                                 "instructions",
                                                 "max_output_tokens",
                                                 "temperature",
                                                 "top_p",
                                                 "tools",
                                                 "tool_choice",
                                                 "parallel_tool_calls",
                                                 "text",
                                                 "stream",
                                                 "stream_options",
                                                 "store",
                                                 "previous_response_id",
                                                 "metadata",
                                                 "user",
                                                 "safety_identifier",
                                                 "prompt_cache_key",
                                                 "prompt_cache_retention",
                                                 "service_tier",
                                                 "truncation",
                                                 "reasoning",
                                                 "include",
                                                 "top_logprobs",
                                                 "max_tool_calls",
                                                 "background"};
// Sampling extras vLLM and llama-server users send; the chat path honours them.
constexpr std::string_view kChatExtras[] = {"top_k",
                                            "min_p",
                                            "seed",
                                            "stop",
                                            "presence_penalty",
                                            "frequency_penalty",
                                            "repetition_penalty",
                                            "logit_bias",
                                            "min_tokens",
                                            "ignore_eos",
                                            "stop_token_ids",
                                            "speculative",
                                            "chat_template_kwargs",
                                            "chat_template",
                                            "n_predict",
                                            "typical_p",
                                            "repeat_penalty",
                                            "repeat_last_n",
                                            "dry_multiplier",
                                            "dry_base",
                                            "dry_allowed_length",
                                            "dry_penalty_last_n",
                                            "dry_sequence_breakers",
                                            "xtc_probability",
                                            "xtc_threshold",
                                            "mirostat",
                                            "include_stop_str_in_output",
                                            "bad_words",
                                            "skip_special_tokens",
                                            "spaces_between_special_tokens",
                                            "truncate_prompt_tokens",
                                            "priority"};
struct Refused {
  std::string_view name;
  std::string_view why;
};
constexpr Refused kRefusedFields[] = {
    {"conversation", "conversation objects are not supported; chain responses with 'previous_response_id'"},
    {"prompt", "stored prompt templates are not supported; send 'input' and 'instructions'"},
    {"context_management", "server-side context compaction is not supported"},
    {"moderation", "moderation is not supported"},
    {"image", "image generation is not supported"},
    {"access_programs", "programmatic tool calling is not supported"},
    {"background_options", "background responses are not supported"},
    {"prompt_cache_options", "prompt cache options are not supported (the prefix cache is automatic)"},
};

void check_fields(const RequestJson& body) {
  for (const auto& [name, value] : body.items()) {
    if (value.is_null()) continue;
    if (std::find(std::begin(kResponsesFields), std::end(kResponsesFields), name) != std::end(kResponsesFields) ||
        std::find(std::begin(kChatExtras), std::end(kChatExtras), name) != std::end(kChatExtras))
      continue;
    for (const Refused& r : kRefusedFields)
      if (name == r.name)
        bad(fmt::format("'{}' is not supported by this server: {}", name, r.why), ErrorCode::Unsupported);
    bad(fmt::format("'{}' is not a /v1/responses field this server knows; remove it (a field it cannot honour is "
                    "refused, never ignored)",
                    name),
        ErrorCode::Unsupported);
  }
  // Known, and refused unless they ask for the plain behaviour.
  if (bool_field(body, "background", false)) bad("'background' responses are not supported: send the request and wait");
  if (const RequestJson* v = field(body, "truncation"); v && *v != "disabled")
    bad(fmt::format("'truncation' {} is not supported: only \"disabled\" (an input longer than the context is a 400)",
                    shown(*v)));
  if (const RequestJson* v = field(body, "top_logprobs"); v && *v != 0)
    bad("'top_logprobs' is not supported on /v1/responses (use /v1/chat/completions with 'logprobs')");
  if (const RequestJson* v = field(body, "include")) {
    if (!v->is_array()) bad(fmt::format("'include' must be an array, not {}", shown(*v)), ErrorCode::InvalidType);
    if (!v->empty())
      bad(fmt::format("'include' {} is not supported: this server adds no optional output data", shown((*v)[0])));
  }
  if (const RequestJson* v = field(body, "reasoning")) {
    if (!v->is_object()) bad(fmt::format("'reasoning' must be an object, not {}", shown(*v)), ErrorCode::InvalidType);
    for (const auto& [key, setting] : v->items())
      if (!setting.is_null())
        bad(fmt::format("'reasoning.{}' is not supported: a template's reasoning is controlled with "
                        "'chat_template_kwargs' (e.g. {{\"enable_thinking\": false}})",
                        key));
  }
  if (const RequestJson* v = field(body, "stream_options")) {
    if (!v->is_object())
      bad(fmt::format("'stream_options' must be an object, not {}", shown(*v)), ErrorCode::InvalidType);
    for (const auto& [key, setting] : v->items())
      if (key != "include_obfuscation" && !setting.is_null())
        bad(fmt::format("'stream_options.{}' is not supported", key));
  }
  if (const RequestJson* v = field(body, "metadata"); v && !v->is_object())
    bad(fmt::format("'metadata' must be an object of strings, not {}", shown(*v)), ErrorCode::InvalidType);
  for (const char* name : {"user", "safety_identifier", "prompt_cache_key", "previous_response_id", "instructions"})
    if (const RequestJson* v = field(body, name); v && !v->is_string())
      bad(fmt::format("'{}' must be a string, not {}", name, shown(*v)), ErrorCode::InvalidType);
}

// Text content: a string, or parts of the text types (input_text from a user, output_text or
// refusal from the assistant).
std::string content_text(const RequestJson& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    bad(fmt::format("'{}' must be a string or an array of content parts, not {}", path, shown(content)),
        ErrorCode::InvalidType);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string part_path = index_path(path, i);
    const RequestJson& part =
        require_object(content[i], part_path, "a content part ({\"type\": \"input_text\", \"text\": ...})");
    const std::string type = string_of(part, "type", part_path, true);
    if (type == "input_text" || type == "output_text" || type == "text") {
      text += string_of(part, "text", part_path, true);
    } else if (type == "refusal") {
      text += string_of(part, "refusal", part_path, true);
    } else {
      bad(fmt::format("'{}.type' is \"{}\", which is not supported: Tandem reads text only (no image, audio or file "
                      "input)",
                      part_path, type));
    }
  }
  return text;
}

constexpr std::string_view kRoles[] = {"user", "system", "developer", "assistant"};

// Appends one input item to `messages`: a message, a function call (joined to the assistant
// turn it belongs to), a function call's output (a tool message); reasoning is dropped (the
// chat templates drop earlier turns' reasoning too).
void append_item(const RequestJson& item, const std::string& path, const ResponsesStore& store,
                 std::vector<ChatMessage>& messages, int depth = 0) {
  require_object(item, path, "an input item (a message, function_call or function_call_output)");
  const std::string type = string_of(item, "type", path, false);
  if (type.empty() || type == "message") {
    ChatMessage message;
    message.role = string_of(item, "role", path, true);
    if (std::find(std::begin(kRoles), std::end(kRoles), message.role) == std::end(kRoles))
      bad(fmt::format("'{}.role' must be user, system, developer or assistant, not \"{}\"", path, message.role));
    const RequestJson* content = field(item, "content");
    if (!content) bad(fmt::format("'{}.content' is required (a string or an array of text parts)", path));
    message.content = content_text(*content, path + ".content");
    messages.push_back(std::move(message));
  } else if (type == "function_call") {
    chat::ToolCall call;
    call.id = string_of(item, "call_id", path, true);
    call.name = string_of(item, "name", path, true);
    call.arguments = string_of(item, "arguments", path, true);
    if (call.id.empty() || call.name.empty()) bad(fmt::format("'{}' needs a non-empty 'call_id' and 'name'", path));
    // Calls follow the assistant text they came with, in one assistant turn.
    if (messages.empty() || messages.back().role != "assistant") {
      ChatMessage turn;
      turn.role = "assistant";
      turn.null_content = true;
      messages.push_back(std::move(turn));
    }
    messages.back().tool_calls.push_back(std::move(call));
  } else if (type == "function_call_output") {
    ChatMessage result;
    result.role = "tool";
    result.tool_call_id = string_of(item, "call_id", path, true);
    if (result.tool_call_id.empty()) bad(fmt::format("'{}.call_id' must not be empty", path));
    const RequestJson* output = field(item, "output");
    if (!output) bad(fmt::format("'{}.output' is required (a string)", path));
    result.content = content_text(*output, path + ".output");
    messages.push_back(std::move(result));
  } else if (type == "reasoning") {
    // Earlier reasoning is not shown to the model again.
  } else if (type == "item_reference") {
    const std::string id = string_of(item, "id", path, true);
    const std::optional<json> referenced = depth == 0 ? store.find_item(id) : std::nullopt;
    if (!referenced)
      throw ApiError(404, "not_found_error",
                     fmt::format("'{}' refers to item '{}', which this server does not hold (only the output items of "
                                 "stored responses can be referenced)",
                                 path, id.substr(0, 80)));
    append_item(RequestJson(*referenced), path, store, messages, depth + 1);
  } else {
    bad(fmt::format("'{}.type' is \"{}\", which is not supported: input items are messages, function_call, "
                    "function_call_output, reasoning and item_reference",
                    path, type.substr(0, 60)));
  }
}

// Flat Responses tools -> the chat shape ({"type": "function", "function": {...}}).
RequestJson chat_tools(const RequestJson& tools) {
  if (!tools.is_array())
    bad(fmt::format("'tools' must be an array of function tools, not {}", shown(tools)), ErrorCode::InvalidType);
  RequestJson out = RequestJson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string path = index_path("tools", i);
    const RequestJson& tool =
        require_object(tools[i], path, "a function tool ({\"type\": \"function\", \"name\", \"parameters\"})");
    const std::string type = string_of(tool, "type", path, true);
    if (type != "function")
      bad(fmt::format("'{}.type' is \"{}\": only function tools are supported (no built-in tools such as web or file "
                      "search)",
                      path, type.substr(0, 60)));
    RequestJson function = RequestJson::object();
    function["name"] = string_of(tool, "name", path, true);
    if (const RequestJson* v = field(tool, "description")) function["description"] = *v;
    if (const RequestJson* v = field(tool, "parameters")) function["parameters"] = *v;
    if (const RequestJson* v = field(tool, "strict")) function["strict"] = *v;
    for (const auto& [key, value] : tool.items())
      if (key != "type" && key != "name" && key != "description" && key != "parameters" && key != "strict" &&
          !value.is_null())
        bad(fmt::format("'{}.{}' is not supported", path, key));
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

// "none" | "auto" | "required" | {"type": "function", "name"} -> the chat shape.
RequestJson chat_tool_choice(const RequestJson& choice) {
  if (choice.is_string()) return choice;  // the chat parser checks the word
  if (choice.is_object() && choice.value("type", "") == "function") {
    const RequestJson* name = field(choice, "name");
    if (!name || !name->is_string())
      bad(fmt::format("'tool_choice.name' must be a string, not {}", shown(choice)), ErrorCode::InvalidType);
    return {{"type", "function"}, {"function", {{"name", *name}}}};
  }
  bad(fmt::format("'tool_choice' must be \"none\", \"auto\", \"required\" or {{\"type\": \"function\", \"name\": "
                  "...}} (no built-in tools), not {}",
                  shown(choice)));
}

// text.format -> response_format.
RequestJson chat_response_format(const RequestJson& text) {
  require_object(text, "text", "an object ({\"format\": {...}})");
  for (const auto& [key, value] : text.items())
    if (key != "format" && !value.is_null()) bad(fmt::format("'text.{}' is not supported (only 'text.format')", key));
  const RequestJson* format = field(text, "format");
  if (!format) return nullptr;
  require_object(*format, "text.format", "an object ({\"type\": \"text\" | \"json_object\" | \"json_schema\"})");
  const std::string type = string_of(*format, "type", "text.format", true);
  if (type == "text") return nullptr;
  if (type == "json_object") return {{"type", "json_object"}};
  if (type != "json_schema")
    bad(fmt::format("'text.format.type' must be \"text\", \"json_object\" or \"json_schema\", not \"{}\"",
                    type.substr(0, 60)));
  RequestJson schema = RequestJson::object();
  schema["name"] = string_of(*format, "name", "text.format", true);
  const RequestJson* body = field(*format, "schema");
  if (!body) bad("'text.format.schema' is required (a JSON Schema object)");
  schema["schema"] = *body;
  if (const RequestJson* v = field(*format, "strict")) schema["strict"] = *v;
  if (const RequestJson* v = field(*format, "description")) schema["description"] = *v;
  return {{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

json echo_tools(const ApiRequest& api) {
  json tools = json::array();
  for (const ToolDefinition& t : api.tools)
    tools.push_back({{"type", "function"},
                     {"name", t.name},
                     {"description", t.description.empty() ? json(nullptr) : json(t.description)},
                     {"parameters", t.parameters.is_null() ? json(nullptr) : json::parse(t.parameters.dump())},
                     {"strict", t.strict}});
  return tools;
}

json echo_tool_choice(const ToolChoice& choice) {
  switch (choice.mode) {
    case ToolChoice::Mode::Auto: return "auto";
    case ToolChoice::Mode::None: return "none";
    case ToolChoice::Mode::Required: return "required";
    case ToolChoice::Mode::Function: return {{"type", "function"}, {"name", choice.function}};
  }
  return "auto";
}

ResponsesRequest parse_fields(const RequestJson& body, int64_t default_max_tokens,
                              const SpeculationParams& default_speculation, const ResponsesStore& store,
                              const std::function<bool()>& abandoned) {
  check_fields(body);
  ResponsesRequest request;
  request.store = bool_field(body, "store", true);
  if (const RequestJson* v = field(body, "previous_response_id")) {
    request.previous_response_id = v->get<std::string>();
    std::optional<StoredResponse> previous = store.get(request.previous_response_id);
    if (!previous)
      throw ApiError(
          404, "not_found_error",
          fmt::format("previous response '{}' is not stored on this server: unknown, sent with 'store': "
                      "false, or evicted (the server keeps the last {} responses, at most {} MiB)",
                      request.previous_response_id.substr(0, 80), store.max_responses(), store.max_bytes() >> 20));
    request.history = std::move(previous->conversation);
  }
  const RequestJson* input = field(body, "input");
  if (!input && request.previous_response_id.empty())
    bad("'input' is required (a string or an array of items)", ErrorCode::MissingRequired);
  if (input && input->is_string()) {
    request.history.push_back({"user", input->get<std::string>()});
  } else if (input && input->is_array()) {
    if (input->empty() && request.previous_response_id.empty()) bad("'input' must not be an empty array");
    for (size_t i = 0; i < input->size(); ++i) append_item((*input)[i], index_path("input", i), store, request.history);
  } else if (input) {
    bad(fmt::format("'input' must be a string or an array of items, not {}", shown(*input)), ErrorCode::InvalidType);
  }
  if (request.history.empty()) bad("'input' holds no message for the model to answer");

  // The chat body of the shared fields; the messages are set below, already parsed.
  RequestJson chat = RequestJson::object();
  chat["messages"] = RequestJson::array({{{"role", "user"}, {"content", ""}}});
  chat["add_generation_prompt"] = true;
  chat["continue_final_message"] = false;
  for (const char* name : {"model", "temperature", "top_p", "parallel_tool_calls", "stream"})
    if (const RequestJson* v = field(body, name)) chat[name] = *v;
  for (std::string_view name : kChatExtras)
    if (const RequestJson* v = field(body, std::string(name).c_str())) chat[std::string(name)] = *v;
  if (const RequestJson* v = field(body, "max_output_tokens")) {
    if (!v->is_number_integer() || v->get<int64_t>() < 1)
      bad(fmt::format("'max_output_tokens' must be an integer of at least 1, not {}", shown(*v)));
    chat["max_completion_tokens"] = *v;
  }
  if (const RequestJson* v = field(body, "tools")) chat["tools"] = chat_tools(*v);
  if (const RequestJson* v = field(body, "tool_choice")) chat["tool_choice"] = chat_tool_choice(*v);
  if (const RequestJson* v = field(body, "text"))
    if (RequestJson format = chat_response_format(*v); !format.is_null()) chat["response_format"] = std::move(format);
  request.api = parse_request(Endpoint::Chat, chat.dump(), default_max_tokens, default_speculation, abandoned);

  const std::string instructions = field(body, "instructions") ? body["instructions"].get<std::string>() : "";
  request.api.messages.clear();
  if (!instructions.empty()) request.api.messages.push_back({"system", instructions});
  for (const ChatMessage& m : request.history) request.api.messages.push_back(m);

  json& echo = request.echo;
  echo["instructions"] = instructions.empty() ? json(nullptr) : json(instructions);
  echo["max_output_tokens"] = field(body, "max_output_tokens") ? json(body["max_output_tokens"]) : json(nullptr);
  echo["metadata"] = field(body, "metadata") ? json::parse(body["metadata"].dump()) : json::object();
  echo["parallel_tool_calls"] = request.api.parallel_tool_calls;
  echo["previous_response_id"] =
      request.previous_response_id.empty() ? json(nullptr) : json(request.previous_response_id);
  echo["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
  echo["store"] = request.store;
  echo["temperature"] = request.api.params.sampling.temperature;
  echo["text"] = {{"format", {{"type", "text"}}}};
  if (const RequestJson* v = field(body, "text"); v && field(*v, "format"))
    echo["text"]["format"] = json::parse((*v)["format"].dump());
  echo["tool_choice"] = echo_tool_choice(request.api.tool_choice);
  echo["tools"] = echo_tools(request.api);
  echo["top_p"] = request.api.params.sampling.top_p;
  echo["truncation"] = "disabled";
  echo["user"] = field(body, "user") ? json(body["user"]) : json(nullptr);
  return request;
}

}  // namespace

ResponsesRequest parse_responses_request(std::string_view body_text, int64_t default_max_tokens,
                                         const SpeculationParams& default_speculation, const ResponsesStore& store,
                                         const std::function<bool()>& abandoned) {
  const RequestJson body = parse_json_object(body_text, {}, abandoned);
  try {
    return parse_fields(body, default_max_tokens, default_speculation, store, abandoned);
  } catch (const json::exception& e) {  // a type mismatch a check above missed is still the client's
    bad(std::string("the request does not have the expected shape: ") + e.what());
  }
}

std::string random_item_id(std::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32)};
  std::string id(prefix);
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 48; ++i) id += kHex[rng() & 15];
  return id;
}

ResponseBuilder::ResponseBuilder(const ResponsesRequest& request, std::string id, int64_t created_at, std::string model)
    : request_(request), id_(std::move(id)), created_at_(created_at), model_(std::move(model)) {}

json ResponseBuilder::item_json(const Item& item, bool done) const {
  const std::string status = !done ? "in_progress" : item.incomplete ? "incomplete" : "completed";
  switch (item.kind) {
    case Item::Kind::Message: {
      json content = json::array();
      if (done)
        content.push_back({{"type", "output_text"},
                           {"text", item.text},
                           {"annotations", json::array()},
                           {"logprobs", json::array()}});
      return {{"id", item.id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", content}};
    }
    case Item::Kind::Reasoning: {
      json content = json::array();
      if (done) content.push_back({{"type", "reasoning_text"}, {"text", item.text}});
      return {
          {"id", item.id}, {"type", "reasoning"}, {"status", status}, {"summary", json::array()}, {"content", content}};
    }
    case Item::Kind::FunctionCall:
      return {{"id", item.id},     {"type", "function_call"},
              {"status", status},  {"call_id", item.call_id},
              {"name", item.name}, {"arguments", done ? item.arguments : std::string()}};
  }
  return nullptr;
}

json ResponseBuilder::response_json(std::string_view status, const json& usage, const json& incomplete_details,
                                    const json& error) const {
  json output = json::array();
  if (status != "in_progress")
    for (const Item& item : items_) output.push_back(item_json(item, true));
  json response = {{"id", id_},
                   {"object", "response"},
                   {"created_at", created_at_},
                   {"status", status},
                   {"error", error},
                   {"incomplete_details", incomplete_details},
                   {"model", model_},
                   {"output", std::move(output)},
                   {"usage", usage}};
  for (const auto& [key, value] : request_.echo.items()) response[key] = value;
  return response;
}

void ResponseBuilder::set_usage(int64_t prompt_tokens, int64_t cached_tokens, int64_t completion_tokens) {
  usage_ = {{"input_tokens", prompt_tokens},
            {"input_tokens_details", {{"cached_tokens", cached_tokens}}},
            {"output_tokens", completion_tokens},
            {"output_tokens_details", {{"reasoning_tokens", 0}}},
            {"total_tokens", prompt_tokens + completion_tokens}};
}

namespace {

bool cut_by_length(FinishReason reason) {
  return reason == FinishReason::Length || reason == FinishReason::ContextLimit;
}

json incomplete_of(FinishReason reason) {
  return cut_by_length(reason) ? json{{"reason", "max_output_tokens"}} : json(nullptr);
}

}  // namespace

json ResponseBuilder::whole(const Completion& completion) {
  const ChatReply reply = completion.reply.value_or(ChatReply{completion.text, {}, {}});
  const bool cut = cut_by_length(completion.finish_reason);
  if (!reply.reasoning_content.empty())
    items_.push_back({Item::Kind::Reasoning, random_item_id("rs_"), reply.reasoning_content, {}, {}, {}, false});
  if (!reply.content.empty() || reply.tool_calls.empty())
    items_.push_back({Item::Kind::Message, random_item_id("msg_"), reply.content, {}, {}, {}, cut});
  for (const chat::ToolCall& call : reply.tool_calls)
    items_.push_back({Item::Kind::FunctionCall, random_item_id("fc_"), {}, call.id, call.name, call.arguments, false});
  set_usage(completion.prompt_tokens, completion.cached_tokens, completion.completion_tokens);
  final_ = response_json(cut ? "incomplete" : "completed", usage_, incomplete_of(completion.finish_reason), nullptr);
  return final_;
}

std::string ResponseBuilder::event(std::string_view type, json fields) {
  json payload = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [key, value] : fields.items()) payload[key] = std::move(value);
  return fmt::format("event: {}\ndata: {}\n\n", type, dump_json(payload));
}

std::string ResponseBuilder::stream_start() {
  const json response = response_json("in_progress", nullptr, nullptr, nullptr);
  std::string out = event("response.created", {{"response", response}});  // two statements: numbered in order
  return out + event("response.in_progress", {{"response", response}});
}

std::string ResponseBuilder::open_item(Item::Kind kind) {
  std::string out = close_item();
  const char* prefix = kind == Item::Kind::Message ? "msg_" : kind == Item::Kind::Reasoning ? "rs_" : "fc_";
  items_.push_back({kind, random_item_id(prefix), {}, {}, {}, {}, false});
  open_ = static_cast<int>(items_.size()) - 1;
  return out;
}

std::string ResponseBuilder::close_item() {
  if (open_ < 0) return {};
  const Item& item = items_[static_cast<size_t>(open_)];
  const json common = {{"item_id", item.id}, {"output_index", open_}};
  std::string out;
  const auto with = [&](json extra) {
    json fields = common;
    for (auto& [key, value] : extra.items()) fields[key] = std::move(value);
    return fields;
  };
  switch (item.kind) {
    case Item::Kind::Message: {
      const json part = {
          {"type", "output_text"}, {"text", item.text}, {"annotations", json::array()}, {"logprobs", json::array()}};
      out += event("response.output_text.done",
                   with({{"content_index", 0}, {"text", item.text}, {"logprobs", json::array()}}));
      out += event("response.content_part.done", with({{"content_index", 0}, {"part", part}}));
      break;
    }
    case Item::Kind::Reasoning: {
      const json part = {{"type", "reasoning_text"}, {"text", item.text}};
      out += event("response.reasoning_text.done", with({{"content_index", 0}, {"text", item.text}}));
      out += event("response.content_part.done", with({{"content_index", 0}, {"part", part}}));
      break;
    }
    case Item::Kind::FunctionCall:
      out += event("response.function_call_arguments.done", with({{"arguments", item.arguments}}));
      break;
  }
  out += event("response.output_item.done", {{"output_index", open_}, {"item", item_json(item, true)}});
  open_ = -1;
  return out;
}

std::string ResponseBuilder::stream_deltas(const std::vector<json>& deltas) {
  std::string out;
  for (const json& delta : deltas) {
    if (delta.contains("tool_calls")) {
      for (const json& call : delta["tool_calls"]) {
        out += open_item(Item::Kind::FunctionCall);
        Item& item = items_.back();
        item.call_id = call["id"].get<std::string>();
        item.name = call["function"]["name"].get<std::string>();
        out += event("response.output_item.added", {{"output_index", open_}, {"item", item_json(item, false)}});
        item.arguments = call["function"]["arguments"].get<std::string>();
        out += event("response.function_call_arguments.delta",
                     {{"item_id", item.id}, {"output_index", open_}, {"delta", item.arguments}});
        out += close_item();
      }
      continue;
    }
    const bool reasoning = delta.contains("reasoning_content");
    const std::string& text = delta[reasoning ? "reasoning_content" : "content"].get_ref<const std::string&>();
    const Item::Kind kind = reasoning ? Item::Kind::Reasoning : Item::Kind::Message;
    if (open_ < 0 || items_[static_cast<size_t>(open_)].kind != kind) {
      out += open_item(kind);
      const Item& item = items_.back();
      out += event("response.output_item.added", {{"output_index", open_}, {"item", item_json(item, false)}});
      const json part =
          reasoning
              ? json{{"type", "reasoning_text"}, {"text", ""}}
              : json{
                    {"type", "output_text"}, {"text", ""}, {"annotations", json::array()}, {"logprobs", json::array()}};
      out += event("response.content_part.added",
                   {{"item_id", item.id}, {"output_index", open_}, {"content_index", 0}, {"part", part}});
    }
    Item& item = items_[static_cast<size_t>(open_)];
    item.text += text;
    json fields = {{"item_id", item.id}, {"output_index", open_}, {"content_index", 0}, {"delta", text}};
    if (!reasoning) fields["logprobs"] = json::array();
    out += event(reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", std::move(fields));
  }
  return out;
}

std::string ResponseBuilder::stream_finish(const Completion& final_event, const std::string& error) {
  const bool cut = cut_by_length(final_event.finish_reason);
  std::string out;
  // A reply with nothing in it is still one (empty) message, as the whole response has.
  if (items_.empty() && error.empty()) out += stream_deltas({{{"content", ""}}});
  if (open_ >= 0 && cut && items_[static_cast<size_t>(open_)].kind == Item::Kind::Message)
    items_[static_cast<size_t>(open_)].incomplete = true;
  out += close_item();
  set_usage(final_event.prompt_tokens, final_event.cached_tokens, final_event.completion_tokens);
  if (!error.empty()) {
    const json failure = {{"code", "server_error"}, {"message", error}};
    final_ = response_json("failed", usage_, nullptr, failure);
    return out + event("response.failed", {{"response", final_}});
  }
  final_ = cut ? response_json("incomplete", usage_, incomplete_of(final_event.finish_reason), nullptr)
               : response_json("completed", usage_, nullptr, nullptr);
  return out + event(cut ? "response.incomplete" : "response.completed", {{"response", final_}});
}

StoredResponse ResponseBuilder::stored() const {
  StoredResponse stored;
  stored.conversation = request_.history;
  ChatMessage reply;
  reply.role = "assistant";
  for (const Item& item : items_) {
    if (item.kind == Item::Kind::Message) reply.content += item.text;
    if (item.kind == Item::Kind::FunctionCall) reply.tool_calls.push_back({item.call_id, item.name, item.arguments});
  }
  reply.null_content = reply.content.empty() && !reply.tool_calls.empty();
  stored.conversation.push_back(std::move(reply));
  for (const Item& item : items_) stored.output.push_back(item_json(item, true));
  stored.response = final_;
  return stored;
}

}  // namespace tandem::server
