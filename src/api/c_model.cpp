// The C API's errors, model, tokenizer and chat calls (include/tandem/tandem_c.h), each a
// guarded call into the C++ API. Outputs go into the caller's buffers, which are written only
// when the whole output fits; the size needed is reported either way.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "api/c_boundary.h"

using tandem::api::c_boundary::chat_messages;
using tandem::api::c_boundary::fail;
using tandem::api::c_boundary::guarded;

namespace tandem::api::c_boundary {

namespace {
thread_local char last_error[1024] = "";
}

void set_last_error(const char* message) noexcept {
  std::snprintf(last_error, sizeof last_error, "%s", message != nullptr ? message : "");
}

}  // namespace tandem::api::c_boundary

namespace {

tandem_status copy_ids(const std::vector<int32_t>& ids, int32_t* out, size_t capacity, size_t* n_ids) {
  if (n_ids != nullptr) *n_ids = ids.size();
  if (capacity < ids.size() || (out == nullptr && !ids.empty())) {
    const std::string message =
        "the output needs room for " + std::to_string(ids.size()) + " ids; capacity is " + std::to_string(capacity);
    return fail(TANDEM_ERROR_BUFFER_TOO_SMALL, message.c_str());
  }
  std::copy(ids.begin(), ids.end(), out);
  return TANDEM_OK;
}

tandem_status copy_text(const std::string& text, char* out, size_t capacity, size_t* text_len) {
  if (text_len != nullptr) *text_len = text.size();
  if (capacity < text.size() + 1 || out == nullptr) {
    const std::string message = "the output needs " + std::to_string(text.size() + 1) +
                                " bytes (with the NUL); capacity is " + std::to_string(capacity);
    return fail(TANDEM_ERROR_BUFFER_TOO_SMALL, message.c_str());
  }
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
  return TANDEM_OK;
}

}  // namespace

namespace tandem::api::c_boundary {

std::optional<std::vector<ChatMessage>> chat_messages(const tandem_chat_message* messages, size_t n_messages) {
  if (messages == nullptr && n_messages > 0) return std::nullopt;
  std::vector<ChatMessage> converted(n_messages);
  for (size_t i = 0; i < n_messages; ++i) {
    if (messages[i].role == nullptr || messages[i].content == nullptr) return std::nullopt;
    converted[i].role = messages[i].role;
    converted[i].content = messages[i].content;
  }
  return converted;
}

}  // namespace tandem::api::c_boundary

extern "C" {

const char* tandem_last_error(void) { return tandem::api::c_boundary::last_error; }

const char* tandem_status_name(tandem_status status) {
  switch (status) {
    case TANDEM_OK: return "ok";
    case TANDEM_ERROR_INPUT: return "input error";
    case TANDEM_ERROR_BUFFER_TOO_SMALL: return "buffer too small";
    case TANDEM_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case TANDEM_ERROR_OUT_OF_MEMORY: return "out of memory";
    case TANDEM_ERROR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

const char* tandem_version(void) { return TANDEM_VERSION; }

tandem_status tandem_model_load(const char* path, const tandem_model_options* options, tandem_model** model) {
  if (model == nullptr) return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_model_load: model is NULL");
  *model = nullptr;
  if (path == nullptr) return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_model_load: path is NULL");
  return guarded([&] {
    tandem::api::ModelOptions model_options;
    if (options != nullptr && options->tokenizer_path != nullptr)
      model_options.tokenizer_path = options->tokenizer_path;
    if (options != nullptr && options->chat_template != nullptr) model_options.chat_template = options->chat_template;
    *model = new tandem_model{tandem::api::Model::load(path, model_options)};
    return TANDEM_OK;
  });
}

void tandem_model_free(tandem_model* model) { delete model; }

int32_t tandem_model_vocab_size(const tandem_model* model) { return model ? model->model->vocab_size() : 0; }
int64_t tandem_model_context_length(const tandem_model* model) { return model ? model->model->context_length() : 0; }
int32_t tandem_model_bos_token(const tandem_model* model) { return model ? model->model->bos_token() : 0; }
int32_t tandem_model_eos_token(const tandem_model* model) { return model ? model->model->eos_token() : 0; }
int64_t tandem_model_kv_bytes_per_token(const tandem_model* model) {
  return model ? model->model->kv_bytes_per_token() : 0;
}

tandem_status tandem_tokenize(const tandem_model* model, const char* text, size_t text_len, int add_bos, int32_t* ids,
                              size_t capacity, size_t* n_ids) {
  if (model == nullptr) return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_tokenize: model is NULL");
  if (text == nullptr && text_len > 0) return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_tokenize: text is NULL");
  return guarded([&] {
    const std::string_view view = text_len > 0 ? std::string_view(text, text_len) : std::string_view();
    return copy_ids(model->model->tokenize(view, add_bos != 0), ids, capacity, n_ids);
  });
}

tandem_status tandem_detokenize(const tandem_model* model, const int32_t* ids, size_t n_ids, char* text,
                                size_t capacity, size_t* text_len) {
  if (model == nullptr) return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_detokenize: model is NULL");
  if (ids == nullptr && n_ids > 0) return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_detokenize: ids is NULL");
  return guarded([&] {
    const std::vector<int32_t> id_list(ids, ids + n_ids);
    return copy_text(model->model->detokenize(id_list), text, capacity, text_len);
  });
}

tandem_status tandem_render_chat(const tandem_model* model, const tandem_chat_message* messages, size_t n_messages,
                                 char* text, size_t capacity, size_t* text_len) {
  if (model == nullptr) return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_render_chat: model is NULL");
  return guarded([&] {
    const auto converted = chat_messages(messages, n_messages);
    if (!converted)
      return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_render_chat: a message (or its role or content) is NULL");
    return copy_text(model->model->render_chat(*converted), text, capacity, text_len);
  });
}

tandem_status tandem_tokenize_chat(const tandem_model* model, const tandem_chat_message* messages, size_t n_messages,
                                   int32_t* ids, size_t capacity, size_t* n_ids) {
  if (model == nullptr) return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_tokenize_chat: model is NULL");
  return guarded([&] {
    const auto converted = chat_messages(messages, n_messages);
    if (!converted)
      return fail(TANDEM_ERROR_INVALID_ARGUMENT, "tandem_tokenize_chat: a message (or its role or content) is NULL");
    return copy_ids(model->model->tokenize_chat(*converted), ids, capacity, n_ids);
  });
}

}  // extern "C"
