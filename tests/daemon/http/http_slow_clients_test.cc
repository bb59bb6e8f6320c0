// Slow and unauthenticated clients against the real octod's HTTP API
// (issue 28): they cannot hold every connection, the deadlines are
// whole-request limits, and a request without the token is refused from
// its headers, before its body is read.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/daemon/http/http_test_client.h"
#include "tests/daemon/server/octod_harness.h"

namespace octo::testing {
namespace {

using Clock = std::chrono::steady_clock;

// A TCP connection to 127.0.0.1:port from `source` (any 127.x.y.z: the
// whole block is loopback, so a test can be several clients).
int ConnectFrom(const char* source, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in local = {};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &local.sin_addr);
  sockaddr_in server = {};
  server.sin_family = AF_INET;
  server.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &server.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof(server)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// What arrives on `fd` within `timeout`, until the peer closes; `closed`
// says whether it did.
std::string ReadFor(int fd, std::chrono::milliseconds timeout, bool* closed) {
  std::string received;
  *closed = false;
  const auto deadline = Clock::now() + timeout;
  for (;;) {  // one look at least, even with no time to wait
    pollfd p{fd, POLLIN, 0};
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (::poll(&p, 1, std::max(left, 0)) <= 0) break;
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      *closed = true;
      break;
    }
    received.append(buffer, static_cast<size_t>(n));
  }
  return received;
}

class HttpSlowClientsTest : public OctodTest {
 protected:
  void SetUp() override { MakeModel("tiny", 2); }

  void StartWithHttp(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = ServeArgs("tiny", {"--http-listen", "127.0.0.1:0"});
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(octod_.Start(args));
    port_ = octod_.HttpPort();
    ASSERT_NE(port_, 0) << octod_.Log();
  }

  int port_ = 0;
};

constexpr char kSlowRequest[] =
    "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n";

// 300 clients from one address trickling a request a byte a second: they
// get 503 with Retry-After past the per-address cap, the rest hold their
// connections only until the header deadline, and all the while a normal
// client from another address is served at once.
TEST_F(HttpSlowClientsTest, ThreeHundredSlowClientsDoNotStopANormalOne) {
  StartWithHttp();
  constexpr int kSlow = 300;
  std::vector<int> slow;
  for (int i = 0; i < kSlow; ++i) {
    const int fd = ConnectFrom("127.0.0.2", port_);
    ASSERT_GE(fd, 0) << "connection " << i;
    slow.push_back(fd);
  }
  int busy = 0;
  std::vector<bool> closed(kSlow, false);
  const auto start = Clock::now();
  for (int second = 0; second < 3; ++second) {
    for (int i = 0; i < kSlow; ++i) {
      if (closed[i]) continue;
      (void)!::send(slow[i], &kSlowRequest[second], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      bool gone = false;
      const std::string got = ReadFor(slow[i], std::chrono::milliseconds(0), &gone);
      if (got.find("503 Service Unavailable") != std::string::npos) {
        EXPECT_NE(got.find("Retry-After: 1"), std::string::npos) << got;
        ++busy;
        closed[i] = true;
      }
    }
    // The normal client, from 127.0.0.1, each second.
    const auto asked = Clock::now();
    const HttpReply reply = Post(port_, "/v1/completions", {{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 2}});
    EXPECT_EQ(reply.status, 200) << reply.body;
    EXPECT_LT(Clock::now() - asked, std::chrono::seconds(1)) << "second " << second;
    std::this_thread::sleep_until(start + std::chrono::seconds(second + 1));
  }
  EXPECT_GE(busy, kSlow - 64) << "past the per-address cap (64) the slow ones are refused";
  for (int fd : slow) ::close(fd);
}

TEST_F(HttpSlowClientsTest, TheHeaderDeadlineIsForTheWholeHeaderNotPerByte) {
  StartWithHttp();
  const int fd = ConnectFrom("127.0.0.3", port_);
  ASSERT_GE(fd, 0);
  const auto start = Clock::now();
  bool closed = false;
  for (size_t i = 0; i < sizeof(kSlowRequest) - 1 && !closed; ++i) {
    (void)!::send(fd, &kSlowRequest[i], 1, MSG_NOSIGNAL);
    ReadFor(fd, std::chrono::seconds(1), &closed);  // a byte a second: never quiet for long
  }
  const auto held = Clock::now() - start;
  EXPECT_TRUE(closed) << "octod closed the connection";
  EXPECT_GE(held, std::chrono::seconds(9));
  EXPECT_LE(held, std::chrono::seconds(12)) << "the 10 s header deadline, not 5 minutes per byte";
  ::close(fd);
  const HttpReply reply = Get(port_, "/api/version");
  EXPECT_EQ(reply.status, 200) << "octod serves on";
}

TEST_F(HttpSlowClientsTest, AnUnauthenticatedBodyIsRefusedFromItsHeaders) {
  const std::string token_file = dir_.Path("token");
  std::ofstream(token_file) << "slow-clients-token-0123456789\n";
  std::filesystem::permissions(token_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  StartWithHttp({"--token-file", token_file});
  const int fd = ConnectFrom("127.0.0.1", port_);
  ASSERT_GE(fd, 0);
  // Headers announcing 8 MiB, with a wrong token, and no body yet.
  const std::string headers = absl::StrCat(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\nContent-Type: application/json\r\n"
      "Content-Length: ",
      8 << 20, "\r\n\r\n");
  ASSERT_EQ(::send(fd, headers.data(), headers.size(), MSG_NOSIGNAL), static_cast<ssize_t>(headers.size()));
  const auto sent = Clock::now();
  bool closed = false;
  const std::string reply = ReadFor(fd, std::chrono::seconds(3), &closed);
  EXPECT_EQ(reply.rfind("HTTP/1.1 401", 0), 0u) << reply;
  EXPECT_NE(reply.find("invalid_api_key"), std::string::npos) << reply;
  EXPECT_LT(Clock::now() - sent, std::chrono::seconds(3));
  EXPECT_TRUE(closed) << "the connection ends: its body is not read";
  ::close(fd);
}

}  // namespace
}  // namespace octo::testing
