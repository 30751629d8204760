// /tokenize, /detokenize and /apply-template on one connection (see session.h): the body is
// read on the worker pool (tokenize_api.h), as a prompt is, so a long text never stalls the
// I/O thread; the answer is one JSON body. No engine work: the tokenizer and the chat
// renderer are immutable and shared.

#include <cstdio>

#include "base/error.h"
#include "server/http/session.h"
#include "server/http/worker_job.h"
#include "server/refusal.h"
#include "server/tokenize_api.h"

namespace tandem::server {

namespace asio = boost::asio;

namespace {

// A body (JSON text), or why there is none.
struct UtilityAnswer {
  std::string body;
  Refusal refusal;
};

UtilityAnswer answer(Session::TextUtility utility, const ServerState& state, const GenerationService& engine,
                     const std::string& body, const std::function<bool()>& abandoned) {
  UtilityAnswer answer;
  try {
    switch (utility) {
      case Session::TextUtility::Tokenize: {
        const VllmTokenizeContext vllm{&state.chat_renderer, state.config.chat_template_kwargs,
                                       engine.stats().context_length};
        answer.body = tokenize_response(body, engine.tokenizer(), abandoned, vllm);
        break;
      }
      case Session::TextUtility::Detokenize:
        answer.body = dump_json(detokenize_json(body, engine.tokenizer(), abandoned));
        break;
      case Session::TextUtility::ApplyTemplate:
        answer.body =
            dump_json(apply_template_json(body, state.chat_renderer, state.config.chat_template_kwargs, abandoned));
        break;
    }
  } catch (...) {
    answer.refusal = refusal_for_current_exception();
    if (!answer.refusal.internal_detail.empty())
      log_line(state, "internal error answering a text utility request: " + answer.refusal.internal_detail, "error");
  }
  return answer;
}

}  // namespace

asio::awaitable<bool> Session::serve_text_utility(TextUtility utility, HttpRequest request, bool keep_alive) {
  const unsigned version = request.version();
  GenerationService* engine = state_.engine.load();
  if (engine == nullptr) co_return co_await send(loading_response(version, keep_alive));
  UtilityAnswer result = co_await on_worker([&](const std::function<bool()>& abandoned) {
    return answer(utility, state_, *engine, request.body(), abandoned);
  });
  if (result.refusal.abandoned) co_return co_await answer_abandoned(version);
  if (result.refusal.refused()) co_return co_await send(error_response(version, result.refusal, keep_alive));
  co_return co_await send(json_response(version, std::move(result.body), keep_alive));
}

}  // namespace tandem::server
