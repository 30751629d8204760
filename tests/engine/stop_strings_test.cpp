// Stop strings (engine/stop_strings.h): what the engine releases of a sequence's held text and
// where it stops. The engine tests see these through whole requests; here, the cases a tiny
// model's text rarely produces: several stop strings at one position, a tail that could start
// either of two stop strings, release on finishing.
#include "engine/stop_strings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tandem {
namespace {

TEST(StopStrings, FindsTheEarliestAndAtOnePositionTheLongest) {
  size_t length = 0;
  EXPECT_EQ(find_stop("a stop, then end", {"end", "stop"}, &length), 2u);
  EXPECT_EQ(length, 4u);
  length = 0;
  EXPECT_EQ(find_stop("xx END!", {"END", "END!", "EN"}, &length), 3u);
  EXPECT_EQ(length, 4u);
  length = 0;
  EXPECT_EQ(find_stop("nothing here", {"zzz"}, &length), std::string::npos);
  EXPECT_EQ(find_stop("no stops at all", {}, &length), std::string::npos);
}

TEST(StopStrings, HoldsBackTheLongestTailThatCouldStartAStopString) {
  EXPECT_EQ(stop_prefix_suffix("hello wor", {"world", "or not"}), 3u);  // "wor"
  EXPECT_EQ(stop_prefix_suffix("hello o", {"world", "or not"}), 1u);    // "o"
  EXPECT_EQ(stop_prefix_suffix("hello", {"xyz"}), 0u);
  // A whole stop string is found, not held: only proper prefixes count.
  EXPECT_EQ(stop_prefix_suffix("ab", {"ab"}), 0u);
  EXPECT_EQ(stop_prefix_suffix("xa", {"ab"}), 1u);
}

TEST(StopStrings, ReleasesUpToTheStopAndDropsTheRest) {
  std::string held = "one two STOP three";
  ReleasedText released = release_held_text(held, {"STOP"}, /*include_stop=*/false, /*finishing=*/false);
  EXPECT_TRUE(released.stopped);
  EXPECT_EQ(released.text, "one two ");
  EXPECT_TRUE(held.empty());

  held = "one two STOP three";
  released = release_held_text(held, {"STOP"}, /*include_stop=*/true, /*finishing=*/false);
  EXPECT_TRUE(released.stopped);
  EXPECT_EQ(released.text, "one two STOP");
}

TEST(StopStrings, KeepsAPossibleStartUnlessFinishing) {
  std::string held = "one two ST";
  ReleasedText released = release_held_text(held, {"STOP"}, false, /*finishing=*/false);
  EXPECT_FALSE(released.stopped);
  EXPECT_EQ(released.text, "one two ");
  EXPECT_EQ(held, "ST");

  released = release_held_text(held, {"STOP"}, false, /*finishing=*/true);
  EXPECT_FALSE(released.stopped);
  EXPECT_EQ(released.text, "ST");
  EXPECT_TRUE(held.empty());

  held = "plain text";
  released = release_held_text(held, {}, false, false);
  EXPECT_EQ(released.text, "plain text");
  EXPECT_TRUE(held.empty());
}

}  // namespace
}  // namespace tandem
