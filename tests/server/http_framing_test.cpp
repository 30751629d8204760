// How the server reads requests off a connection (src/server/http_framing.h), without
// sockets: every smuggling shape of issue 33 is refused with nothing after it read, malformed
// chunk sizes are a 400, and pipelined requests are read the same however TCP cuts them.
// The server on loopback: hostile_framing_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "server/http_framing.h"

namespace tandem::server {
namespace {

constexpr std::string_view kSmuggled = "GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\n";

std::string post_with(std::string_view header_lines, std::string_view body) {
  return "POST /v1/completions HTTP/1.1\r\nHost: a\r\n" + std::string(header_lines) + "\r\n" + std::string(body);
}

TEST(HttpFraming, TransferEncodingOtherThanChunkedIsRefused) {
  struct Case {
    const char* header;
    int status;
  };
  for (const Case& c : {Case{"Transfer-Encoding: xchunked\r\n", 400}, Case{"Transfer-Encoding: identity\r\n", 400},
                        Case{"Transfer-Encoding: gzip\r\n", 400}, Case{"Transfer-Encoding: chunked, identity\r\n", 400},
                        Case{"Transfer-Encoding: gzip, chunked\r\n", 501},
                        Case{"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", 400},
                        Case{"Transfer-Encoding: gzip\r\nContent-Length: 5\r\n", 400},
                        Case{"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400},
                        Case{"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 400}}) {
    for (const size_t segment : {size_t{0}, size_t{1}, size_t{7}}) {
      const ConnectionRead read =
          read_connection(post_with(c.header, "0\r\n\r\n") + std::string(kSmuggled), {}, segment);
      EXPECT_TRUE(read.requests.empty()) << c.header << "a request was read (segment " << segment << ")";
      ASSERT_TRUE(read.refusal) << c.header;
      EXPECT_EQ(read.refusal->status, c.status) << c.header << read.refusal->message;
    }
  }
  // In HTTP/1.0 any Transfer-Encoding is faulty framing (RFC 9112 6.1).
  const ConnectionRead old = read_connection(
      "POST /v1/completions HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + std::string(kSmuggled), {});
  EXPECT_TRUE(old.requests.empty());
  ASSERT_TRUE(old.refusal);
  EXPECT_NE(old.refusal->message.find("HTTP/1.0"), std::string::npos) << old.refusal->message;
}

TEST(HttpFraming, ChunkedInAnyCaseIsRead) {
  for (const char* header :
       {"Transfer-Encoding: chunked\r\n", "Transfer-Encoding: CHUNKED\r\n", "transfer-encoding:  Chunked \r\n"}) {
    const ConnectionRead read = read_connection(post_with(header, "2\r\n{}\r\n0\r\n\r\n") + std::string(kSmuggled), {});
    EXPECT_FALSE(read.refusal) << header << read.refusal->message;
    ASSERT_EQ(read.requests.size(), 2u) << header;
    EXPECT_EQ(read.requests[0].body, "{}");
    EXPECT_EQ(read.requests[1].target, "/v1/models");
  }
}

TEST(HttpFraming, MalformedChunkSizesAre400) {
  for (const char* size : {"zz", "-1", "1ffffffffffffffff", "ffffffffffffffffff", ""}) {
    const ConnectionRead read =
        read_connection(post_with("Transfer-Encoding: chunked\r\n", std::string(size) + "\r\nx\r\n0\r\n\r\n"), {});
    EXPECT_TRUE(read.requests.empty()) << "chunk size '" << size << "'";
    ASSERT_TRUE(read.refusal) << "chunk size '" << size << "'" << (read.over_limit ? ": over the limit" : "");
    EXPECT_EQ(read.refusal->status, 400);
  }
}

TEST(HttpFraming, PipelinedRequestsReadAlikeInAnySegments) {
  const std::string bytes = "GET /health HTTP/1.1\r\nHost: a\r\n\r\n" + post_with("Content-Length: 2\r\n", "{}") +
                            post_with("Transfer-Encoding: chunked\r\n", "1;x=y\r\n[\r\n1\r\n]\r\n0\r\nT: 1\r\n\r\n") +
                            "GET /last HTTP/1.1\r\nConnection: close\r\n\r\nGET /never HTTP/1.1\r\n\r\n";
  const ConnectionRead whole = read_connection(bytes, {});
  ASSERT_EQ(whole.requests.size(), 4u);
  EXPECT_EQ(whole.requests[1].body, "{}");
  EXPECT_EQ(whole.requests[2].body, "[]");
  EXPECT_EQ(whole.requests[3].target, "/last");
  EXPECT_FALSE(whole.requests[3].keep_alive);
  for (size_t segment = 1; segment <= 16; ++segment) {
    const ConnectionRead read = read_connection(bytes, {}, segment);
    ASSERT_EQ(read.requests.size(), 4u) << "segment " << segment;
    EXPECT_EQ(read.consumed, whole.consumed) << "segment " << segment;
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(read.requests[i].body, whole.requests[i].body) << i;
  }
}

TEST(HttpFraming, LimitsStopTheConnection) {
  const FramingLimits limits{.max_header_bytes = 256, .max_body_bytes = 8};
  EXPECT_TRUE(read_connection(post_with("Content-Length: 9\r\n", "123456789"), limits).over_limit);
  EXPECT_TRUE(
      read_connection(post_with("Transfer-Encoding: chunked\r\n", "9\r\n123456789\r\n0\r\n\r\n"), limits).over_limit);
  EXPECT_TRUE(read_connection(post_with("X-Pad: " + std::string(300, 'x') + "\r\n", ""), limits).over_limit);
}

}  // namespace
}  // namespace tandem::server
