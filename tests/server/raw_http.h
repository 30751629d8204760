// RawConnection: a blocking raw-TCP HTTP/1.x client for hostile-client tests. It sends exactly
// the bytes it is given (slowly, pipelined, oversized, half-sent) and reads responses under
// deadlines — Content-Length, chunked and close-delimited bodies — so a test sees what the
// server wrote and whether it closed the connection. Every wait is bounded; nothing here
// retries, follows redirects or speaks TLS. Loopback only.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::testing {

using Clock = std::chrono::steady_clock;

inline Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

struct RawResponse {
  std::string version;  // "HTTP/1.1"
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // as sent, in order
  std::string body;                                          // chunk framing removed
  std::string raw_body;                                      // the body bytes as they came
  bool chunked = false;
  bool close_delimited = false;  // neither Content-Length nor chunked: the body ran to EOF

  // The first header of that name (case-insensitive), if any.
  std::optional<std::string> header(std::string_view name) const {
    const std::string wanted = lowercase(name);
    for (const auto& [key, value] : headers)
      if (lowercase(key) == wanted) return value;
    return std::nullopt;
  }
};

// A request as bytes: "METHOD PATH HTTP/1.x", Host, the extra header lines (each without its
// CRLF), and Content-Length + body when there is a body.
inline std::string http_request(std::string_view method, std::string_view path, std::string_view body = {},
                                const std::vector<std::string>& headers = {}, std::string_view version = "1.1") {
  std::string out = std::string(method) + " " + std::string(path) + " HTTP/" + std::string(version) + "\r\n";
  out += "Host: 127.0.0.1\r\n";
  for (const std::string& line : headers) out += line + "\r\n";
  if (!body.empty() || method == "POST") {
    if (!body.empty()) out += "Content-Type: application/json\r\n";
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  out += "\r\n";
  out += body;
  return out;
}

class RawConnection {
 public:
  RawConnection() = default;
  ~RawConnection() { close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  RawConnection(RawConnection&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)),
        buffer_(std::move(other.buffer_)),
        error_(std::move(other.error_)),
        errno_(other.errno_) {}

  // Connects to 127.0.0.1:port. False (error(), last_errno()) when refused or not in time.
  bool connect(int port, double timeout_s = 2.0) {
    close();
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return fail("socket", errno);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) return true;
    if (errno != EINPROGRESS) return fail("connect", errno);
    if (!wait_for(POLLOUT, deadline_after(timeout_s))) return fail("connect", ETIMEDOUT);
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return fail("connect", err);
    return true;
  }

  // Sends all of `bytes`. False on a write error (the server closed or reset) or time-out.
  bool send(std::string_view bytes, double timeout_s = 5.0) {
    const int err = send_all(fd_, bytes, timeout_s);
    return err == 0 || fail("send", err);
  }

  // send() for a second thread writing while another reads this connection: touches nothing
  // but the socket. 0 when all was sent, else the errno (ETIMEDOUT when out of time).
  static int send_all(int fd, std::string_view bytes, double timeout_s) {
    const auto deadline = deadline_after(timeout_s);
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n > 0) {
        bytes.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return errno;
      if (!wait_for(fd, POLLOUT, deadline)) return ETIMEDOUT;
    }
    return 0;
  }

  // Reads until `marker` is among the bytes received and not yet consumed (say, the first SSE
  // event of a stream). False when the time is up or the connection ends first.
  bool read_until(std::string_view marker, double timeout_s) {
    const auto deadline = deadline_after(timeout_s);
    while (buffer_.find(marker) == std::string::npos)
      if (fill(deadline) <= 0) return false;
    return true;
  }

  // Reads one whole response. nullopt (with error()) when the time is up or the connection
  // ends before the response does; bytes after it stay buffered for the next call.
  std::optional<RawResponse> read_response(double timeout_s, bool head_request = false) {
    const auto deadline = deadline_after(timeout_s);
    for (;;) {  // 1xx responses are skipped
      size_t head_end;
      while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos)
        if (fill(deadline) <= 0) return std::nullopt;
      RawResponse response;
      if (!parse_head(std::string_view(buffer_).substr(0, head_end), response)) {
        error_ = "malformed response head: " + buffer_.substr(0, std::min<size_t>(head_end, 200));
        return std::nullopt;
      }
      buffer_.erase(0, head_end + 4);
      if (response.status >= 100 && response.status < 200) continue;
      if (head_request || response.status == 204 || response.status == 304) return response;
      const auto encoding = response.header("Transfer-Encoding");
      if (encoding && lowercase(*encoding).find("chunked") != std::string::npos) {
        response.chunked = true;
        if (!read_chunked(response, deadline)) return std::nullopt;
      } else if (const auto length = response.header("Content-Length")) {
        const size_t n = std::stoull(*length);
        while (buffer_.size() < n)
          if (fill(deadline) <= 0) return std::nullopt;
        response.body = response.raw_body = buffer_.substr(0, n);
        buffer_.erase(0, n);
      } else {
        response.close_delimited = true;
        for (;;) {
          const int got = fill(deadline);
          if (got == 0) break;  // EOF ends the body
          if (got < 0) return std::nullopt;
        }
        response.body = response.raw_body = std::move(buffer_);
        buffer_.clear();
      }
      return response;
    }
  }

  // Reads (and drops) until the server closes the connection — EOF or a reset. False when it
  // is still open at the deadline.
  bool wait_closed(double timeout_s) {
    const auto deadline = deadline_after(timeout_s);
    for (;;) {
      buffer_.clear();
      const int got = fill(deadline);
      if (got == 0) return true;
      if (got < 0) return errno_ != ETIMEDOUT;  // a reset is a close too
    }
  }

  // Whatever arrived and was not consumed as a response.
  const std::string& unread() const { return buffer_; }
  std::string error() const { return error_; }
  int last_errno() const { return errno_; }
  int fd() const { return fd_; }
  bool is_open() const { return fd_ >= 0; }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  bool fail(const char* what, int err) {
    errno_ = err;
    error_ = std::string(what) + ": " + (err == ETIMEDOUT ? "timed out" : std::strerror(err));
    return false;
  }

  bool wait_for(short events, Clock::time_point deadline) const { return wait_for(fd_, events, deadline); }

  static bool wait_for(int fd, short events, Clock::time_point deadline) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd, events, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(left));
      if (rc > 0) return true;  // ready, or an error/hang-up the next call reports
      if (rc < 0 && errno != EINTR) return false;
    }
  }

  // Appends what arrives before the deadline: >0 bytes read, 0 EOF, -1 error or time-out.
  int fill(Clock::time_point deadline) {
    char chunk[65536];
    for (;;) {
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n > 0) {
        buffer_.append(chunk, static_cast<size_t>(n));
        return static_cast<int>(n);
      }
      if (n == 0) {
        error_ = "the server closed the connection";
        return 0;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return fail("recv", errno), -1;
      if (!wait_for(POLLIN, deadline)) return fail("recv", ETIMEDOUT), -1;
    }
  }

  static bool parse_head(std::string_view head, RawResponse& response) {
    const size_t line_end = std::min(head.find("\r\n"), head.size());
    const std::string_view status_line = head.substr(0, line_end);
    if (status_line.substr(0, 7) != "HTTP/1." || status_line.size() < 12) return false;
    response.version = std::string(status_line.substr(0, 8));
    response.status = std::atoi(std::string(status_line.substr(9, 3)).c_str());
    std::string_view rest = line_end < head.size() ? head.substr(line_end + 2) : std::string_view{};
    while (!rest.empty()) {
      const size_t end = std::min(rest.find("\r\n"), rest.size());
      const std::string_view line = rest.substr(0, end);
      rest = end < rest.size() ? rest.substr(end + 2) : std::string_view{};
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) return false;
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
      response.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
    }
    return response.status > 0;
  }

  bool read_line(std::string& line, Clock::time_point deadline) {
    size_t end;
    while ((end = buffer_.find("\r\n")) == std::string::npos)
      if (fill(deadline) <= 0) return false;
    line = buffer_.substr(0, end);
    buffer_.erase(0, end + 2);
    return true;
  }

  bool read_chunked(RawResponse& response, Clock::time_point deadline) {
    for (;;) {
      std::string size_line;
      if (!read_line(size_line, deadline)) return false;
      response.raw_body += size_line + "\r\n";
      const size_t size = std::stoull(size_line.substr(0, size_line.find(';')), nullptr, 16);
      if (size == 0) {
        for (std::string trailer;;) {  // trailers, up to the empty line
          if (!read_line(trailer, deadline)) return false;
          response.raw_body += trailer + "\r\n";
          if (trailer.empty()) return true;
        }
      }
      while (buffer_.size() < size + 2)
        if (fill(deadline) <= 0) return false;
      response.body.append(buffer_, 0, size);
      response.raw_body.append(buffer_, 0, size + 2);
      buffer_.erase(0, size + 2);
    }
  }

  int fd_ = -1;
  std::string buffer_;  // received, not yet consumed
  std::string error_;
  int errno_ = 0;
};

// One request on a fresh connection; nullopt when anything fails (`why` says what).
inline std::optional<RawResponse> exchange(int port, const std::string& request, double timeout_s = 10.0,
                                           std::string* why = nullptr) {
  RawConnection connection;
  std::optional<RawResponse> response;
  if (connection.connect(port) && connection.send(request)) response = connection.read_response(timeout_s);
  if (!response && why) *why = connection.error();
  return response;
}

// The payloads of an SSE body's "data:" lines, in order.
inline std::vector<std::string> sse_data(std::string_view body) {
  std::vector<std::string> out;
  while (!body.empty()) {
    const size_t end = std::min(body.find('\n'), body.size());
    std::string_view line = body.substr(0, end);
    body = end < body.size() ? body.substr(end + 1) : std::string_view{};
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.substr(0, 5) != "data:") continue;
    line.remove_prefix(5);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    out.emplace_back(line);
  }
  return out;
}

}  // namespace tandem::testing
