// refusal_for_current_exception: the status, type and message each kind of failure gets.
#include "server/refusal.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "base/error.h"
#include "server/openai_protocol.h"

namespace tandem::server {
namespace {

template <typename Throw>
Refusal refusal_of(Throw&& throw_it) {
  try {
    throw_it();
  } catch (...) {
    return refusal_for_current_exception();
  }
  ADD_FAILURE() << "nothing was thrown";
  return {};
}

TEST(Refusal, ApiErrorKeepsItsStatusTypeAndMessage) {
  const Refusal refusal = refusal_of([] { throw ApiError(404, "model_not_found", "no model 'x'"); });
  EXPECT_EQ(refusal.status, 404);
  EXPECT_EQ(refusal.type, "model_not_found");
  EXPECT_EQ(refusal.message, "no model 'x'");
  EXPECT_TRUE(refusal.internal_detail.empty());
  EXPECT_TRUE(refusal.refused());
}

TEST(Refusal, InputErrorIsTheClientsFault) {
  const Refusal refusal = refusal_of([] { throw InputError("prompt is longer than the context"); });
  EXPECT_EQ(refusal.status, 400);
  EXPECT_EQ(refusal.type, "invalid_request_error");
  EXPECT_EQ(refusal.message, "prompt is longer than the context");
  EXPECT_TRUE(refusal.internal_detail.empty());
}

TEST(Refusal, AnythingElseIsAnInternalErrorWhoseDetailStaysInTheLog) {
  const Refusal refusal = refusal_of([] { throw std::logic_error("index 7 out of range in the scheduler"); });
  EXPECT_EQ(refusal.status, 500);
  EXPECT_EQ(refusal.type, "server_error");
  EXPECT_EQ(refusal.message, "internal error");
  EXPECT_EQ(refusal.internal_detail, "index 7 out of range in the scheduler");
  const Refusal unknown = refusal_of([] { throw 42; });
  EXPECT_EQ(unknown.status, 500);
  EXPECT_FALSE(unknown.internal_detail.empty());
}

TEST(Refusal, DefaultIsNoRefusal) { EXPECT_FALSE(Refusal{}.refused()); }

}  // namespace
}  // namespace tandem::server
