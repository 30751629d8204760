// The library is usable without the CLI: TextGenerator (include/tandem/tandem.h) gives the
// same greedy continuation as the reference.
#include <gtest/gtest.h>

#include "support/run_binary.h"
#include "tandem/tandem.h"

namespace tandem::testing {
namespace {

TEST(LibraryApi, GreedyGenerationThroughThePublicHeader) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  TextGenerator generator = TextGenerator::load(shared_path("models/aidreams260K/model.gguf"), "", 1);
  GenerateRequest request{.prompt = "The dream", .max_new_tokens = 20, .sampling = {}};
  request.sampling.temperature = 0;
  std::string streamed;
  const GenerateResponse response = generator.generate(request, [&](std::string_view piece) { streamed += piece; });
  EXPECT_EQ(streamed, response.text);
  EXPECT_EQ(response.text.rfind(" align, as I seep into the void.", 0), 0u) << response.text;
  EXPECT_EQ(response.stop_reason, StopReason::TokenLimit);
  // A second request on the same generator starts from an empty cache.
  EXPECT_EQ(generator.generate(request).text, response.text);
}

TEST(LibraryApi, PromptLongerThanContextIsAnInputError) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  TextGenerator generator = TextGenerator::load(shared_path("models/aidreams260K/model.gguf"), "", 1);
  std::string prompt;
  for (int i = 0; i < 300; ++i) prompt += "dream ";
  EXPECT_THROW(generator.generate({.prompt = prompt, .max_new_tokens = 4, .sampling = {}}), InputError);
}

}  // namespace
}  // namespace tandem::testing
