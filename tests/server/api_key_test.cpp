// API-key checks (src/server/api_key.h): equality is exact whatever the position of the first
// differing byte, and the bearer parsing accepts what RFC 6750 allows and nothing else.
#include <gtest/gtest.h>

#include "server/api_key.h"

namespace tandem::server {
namespace {

TEST(ApiKey, ConstantTimeEqualIsExactEquality) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("sekret", "sekret"));
  EXPECT_FALSE(constant_time_equal("sekret", "sekreT"));   // last byte
  EXPECT_FALSE(constant_time_equal("Sekret", "sekret"));   // first byte
  EXPECT_FALSE(constant_time_equal("sekre", "sekret"));    // a prefix
  EXPECT_FALSE(constant_time_equal("sekret!", "sekret"));  // longer
  EXPECT_FALSE(constant_time_equal("", "sekret"));
  EXPECT_FALSE(constant_time_equal(std::string_view("sek\0et", 6), "sekret"));
}

TEST(ApiKey, BearerHeader) {
  EXPECT_TRUE(bearer_matches("Bearer k1", "k1"));
  EXPECT_TRUE(bearer_matches("bearer k1", "k1"));  // the scheme is case-insensitive
  EXPECT_TRUE(bearer_matches("Bearer  k1 ", "k1"));
  EXPECT_FALSE(bearer_matches("Bearer K1", "k1"));  // the key is not
  EXPECT_FALSE(bearer_matches("Basic k1", "k1"));
  EXPECT_FALSE(bearer_matches("k1", "k1"));
  EXPECT_FALSE(bearer_matches("", "k1"));
  EXPECT_FALSE(bearer_matches("Bearer ", "k1"));
  EXPECT_TRUE(bearer_matches("", ""));  // no key configured: open
  EXPECT_TRUE(bearer_matches("Bearer anything", ""));
}

}  // namespace
}  // namespace tandem::server
