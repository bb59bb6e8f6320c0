// octod as a shared service (issue 28), everything real: systemd's
// notification protocol heard on a datagram socket standing in for
// systemd's, and the watchdog fed only while passes advance; TLS on both
// TCP listeners with certificates the test makes (the openssl command):
// real handshakes, a wrong CA refused, a plain client refused, mutual TLS.
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/daemon/server/octod_harness.h"
#include "tests/storage/test_models.h"

namespace octo::testing {
namespace {

// A unix datagram socket at `path`, as systemd's NOTIFY_SOCKET is.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : fd_(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    sockaddr_un address = {};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~NotifySocket() { ::close(fd_); }
  bool bound() const { return bound_; }

  // The messages that arrive within `timeout`, in order.
  std::vector<std::string> Receive(std::chrono::milliseconds timeout) {
    std::vector<std::string> messages;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return messages;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return messages;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n > 0) messages.emplace_back(buffer, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  bool bound_ = false;
};

int Count(const std::vector<std::string>& messages, const std::string& message) {
  return static_cast<int>(std::count(messages.begin(), messages.end(), message));
}

class OctodServiceTest : public OctodTest {
 protected:
  void SetUp() override { MakeModel("m", 4); }

  // octod started with systemd's variables set (the child inherits them).
  void StartUnderSystemd(NotifySocket& notify, const std::string& watchdog_usec, std::vector<std::string> extra) {
    ASSERT_TRUE(notify.bound());
    ::setenv("NOTIFY_SOCKET", dir_.Path("notify.sock").c_str(), 1);
    ::setenv("WATCHDOG_USEC", watchdog_usec.c_str(), 1);
    const ::testing::AssertionResult started = octod_.Start(ServeArgs("m", std::move(extra)));
    ::unsetenv("NOTIFY_SOCKET");
    ::unsetenv("WATCHDOG_USEC");
    ASSERT_TRUE(started);
  }
};

TEST_F(OctodServiceTest, SystemdHearsReadyThenTheWatchdogThenStopping) {
  NotifySocket notify(dir_.Path("notify.sock"));
  StartUnderSystemd(notify, "400000", {});  // a 0.4 s watchdog: fed every 0.2 s
  const std::vector<std::string> first = notify.Receive(std::chrono::milliseconds(1500));
  ASSERT_FALSE(first.empty()) << octod_.Log();
  EXPECT_EQ(first[0].rfind("READY=1\nSTATUS=serving on unix:", 0), 0u) << first[0];
  EXPECT_GE(Count(first, "WATCHDOG=1"), 4) << "fed about every 0.2 s";
  const RunResult r = octod_.Gen({"Once", "--temp", "0", "-n", "4"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(octod_.Stop());
  const std::vector<std::string> last = notify.Receive(std::chrono::milliseconds(200));
  EXPECT_EQ(Count(last, "STOPPING=1"), 1) << octod_.Log();
}

// A pass standing still (the loader stopped, its stall timeout far off):
// the watchdog is no longer fed, and the log says why; systemd would
// restart octod. Once the loader runs again the pass ends and feeding resumes.
TEST_F(OctodServiceTest, AStandingPassStopsFeedingTheWatchdog) {
  NotifySocket notify(dir_.Path("notify.sock"));
  std::vector<std::string> flags = StreamEveryLayer("m");
  flags.insert(flags.end(), {"--loader-timeout", "600"});
  StartUnderSystemd(notify, "600000", flags);
  const pid_t loader = octod_.Status()["loader"]["pid"].get<int>();
  ASSERT_GT(loader, 0);
  ASSERT_EQ(::kill(loader, SIGSTOP), 0);
  std::unique_ptr<BackgroundRun> client =
      octod_.GenInBackground({"Once upon a time", "--temp", "0", "-n", "8", "--json"}, dir_.Path("gen"));
  ASSERT_TRUE(WaitFor([&] { return octod_.Log().find("watchdog: the forward pass has made no progress") !=
                                   std::string::npos; },
                      std::chrono::seconds(10)))
      << octod_.Log();
  notify.Receive(std::chrono::milliseconds(100));  // what was sent before
  EXPECT_EQ(Count(notify.Receive(std::chrono::milliseconds(1500)), "WATCHDOG=1"), 0) << "the pass stands still";
  ASSERT_EQ(::kill(loader, SIGCONT), 0);
  const RunResult generation = client->Wait();
  EXPECT_EQ(generation.exit_code, 0) << generation.err;
  EXPECT_GE(Count(notify.Receive(std::chrono::milliseconds(1500)), "WATCHDOG=1"), 2) << "fed again";
}

// VmHWM (the peak resident set) of process `pid`, in bytes; 0 if unknown.
uint64_t PeakRss(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmHWM:   1234 kB"
  }
  return 0;
}

// What octod may hold beyond its own footprint without a model, its layer
// and KV budgets and the model's global tensors: activations, the
// tokenizer's tables, per-pass buffers, gRPC's per-call memory.
constexpr uint64_t kRuntimeOverheadBytes = 32ull << 20;

// Memory truth: octod serving a 250 MiB model under a 3-layer budget keeps
// its peak resident set within its footprint with no model loaded, plus the
// layer and KV budgets, the model's globals and kRuntimeOverheadBytes.
TEST_F(OctodServiceTest, PeakRssStaysWithinTheBudgetsPlusAStatedOverhead) {
  GenerateModel(dir_.Path("big.gguf"), "llama-3-8b-draft", "Q4_K_M", [](ModelShape& shape) {
    shape.n_layers = 32;     // 8.3 MiB each: 265 MiB of layers
    shape.vocab_size = 2000;  // small globals, so the layers are what a leak would show
  });
  ASSERT_TRUE(Decompose(dir_.Path("big.gguf"), ModelDir("big")));
  const uint64_t layer = LargestLayerFile(ModelDir("big"));
  const uint64_t layer_budget = 3 * layer, kv_budget = 16ull << 20;

  ASSERT_TRUE(octod_.Start(ServeArgs("")));  // no model: the process's own footprint
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const uint64_t bare = PeakRss(octod_.pid());
  ASSERT_GT(bare, 0u);
  ASSERT_TRUE(octod_.Stop());

  ASSERT_TRUE(octod_.Start(ServeArgs("big", {"--layer-budget", std::to_string(layer_budget), "--kv-budget",
                                             std::to_string(kv_budget)})));
  const std::vector<RunResult> runs = octod_.GenConcurrently({{"Once upon a time", "--temp", "0", "-n", "24"},
                                                              {"The little dog", "--temp", "0", "-n", "24"}});
  for (const RunResult& r : runs) ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json status = octod_.Status();
  const uint64_t globals = JsonU64(status["residency"]["global_bytes"]);
  const uint64_t peak = PeakRss(octod_.pid());
  const uint64_t limit = bare + layer_budget + kv_budget + globals + kRuntimeOverheadBytes;
  std::printf("memory: peak RSS %.1f MiB <= %.1f MiB = %.1f (no model) + %.1f (layers) + %.1f (kv) + %.1f (globals) "
              "+ %.1f (overhead); the model's layers are %.1f MiB\n",
              peak / 1048576.0, limit / 1048576.0, bare / 1048576.0, layer_budget / 1048576.0, kv_budget / 1048576.0,
              globals / 1048576.0, kRuntimeOverheadBytes / 1048576.0, 32.0 * layer / 1048576.0);
  EXPECT_LE(peak, limit) << status.dump();
  EXPECT_LE(JsonU64(status["residency"]["peak_bytes"]), layer_budget) << "the layer budget is never exceeded";
}

// A free localhost TCP port (free when asked; good enough for a test).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t size = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

constexpr char kOpenssl[] = "/usr/bin/openssl";  // RunCommand does not search PATH

// A test PKI in `dir`: ca.pem (and ca.key), server.pem/server.key for
// 127.0.0.1 and localhost, client.pem/client.key (clientAuth), and a second
// CA, other-ca.pem, that signed none of them. EC P-256 keys: fast.
::testing::AssertionResult MakeCertificates(const TempDir& dir) {
  const std::string d = dir.Path("");
  std::ofstream(d + "server.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n";
  std::ofstream(d + "client.ext") << "extendedKeyUsage=clientAuth\n";
  const std::vector<std::vector<std::string>> steps = {
      {kOpenssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
       d + "ca.key", "-out", d + "ca.pem", "-days", "2", "-subj", "/CN=octo test CA"},
      {kOpenssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
       d + "other-ca.key", "-out", d + "other-ca.pem", "-days", "2", "-subj", "/CN=another CA"},
  };
  for (const auto& step : steps) {
    const RunResult r = RunCommand(step);
    if (r.exit_code != 0) return ::testing::AssertionFailure() << r.err;
  }
  for (const std::string name : {"server", "client"}) {
    const RunResult request = RunCommand({kOpenssl, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                          "-nodes", "-keyout", d + name + ".key", "-out", d + name + ".csr", "-subj",
                                          "/CN=" + (name == "server" ? std::string("localhost") : name)});
    if (request.exit_code != 0) return ::testing::AssertionFailure() << request.err;
    const RunResult sign = RunCommand({kOpenssl, "x509", "-req", "-in", d + name + ".csr", "-CA", d + "ca.pem",
                                       "-CAkey", d + "ca.key", "-CAcreateserial", "-out", d + name + ".pem", "-days",
                                       "2", "-extfile", d + name + ".ext"});
    if (sign.exit_code != 0) return ::testing::AssertionFailure() << sign.err;
    std::filesystem::permissions(d + name + ".key", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }
  return ::testing::AssertionSuccess();
}

class OctodTlsTest : public OctodServiceTest {
 protected:
  void SetUp() override {
    OctodServiceTest::SetUp();
    if (!std::filesystem::exists(kOpenssl)) GTEST_SKIP() << "the openssl command is not installed";
    ASSERT_TRUE(MakeCertificates(dir_));
    token_file_ = dir_.Path("token");
    std::ofstream(token_file_) << "tls-test-token-0123456789\n";
    std::filesystem::permissions(token_file_, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }

  // octod with TLS on a TCP gRPC port and on its HTTP API.
  void StartWithTls(std::vector<std::string> extra = {}) {
    port_ = FreePort();
    std::vector<std::string> flags = {"--listen", absl::StrCat("127.0.0.1:", port_), "--token-file", token_file_,
                                      "--http-listen", "127.0.0.1:0", "--tls-cert", dir_.Path("server.pem"),
                                      "--tls-key", dir_.Path("server.key")};
    flags.insert(flags.end(), extra.begin(), extra.end());
    ASSERT_TRUE(octod_.Start(ServeArgs("m", flags)));
    http_port_ = octod_.HttpPort();
    ASSERT_NE(http_port_, 0) << octod_.Log();
  }

  // octo-gen over TCP with `tls` flags.
  RunResult GenOverTcp(std::vector<std::string> tls) const {
    std::vector<std::string> argv = {OctoGenPath(), "--host", absl::StrCat("127.0.0.1:", port_), "--token-file",
                                     token_file_, "Once", "--temp", "0", "-n", "3", "--json"};
    argv.insert(argv.end(), tls.begin(), tls.end());
    return RunCommand(argv);
  }

  // curl's exit code and body for `url` with `flags` (curl exits 0 on any HTTP status).
  RunResult Curl(const std::string& url, std::vector<std::string> flags) const {
    std::vector<std::string> argv = {"/usr/bin/curl", "-sS", "--max-time", "10", "-H",
                                     "Authorization: Bearer tls-test-token-0123456789"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back(url);
    return RunCommand(argv);
  }
  std::string Https(const std::string& path) const { return absl::StrCat("https://127.0.0.1:", http_port_, path); }

  std::string token_file_;
  int port_ = 0, http_port_ = 0;
};

TEST_F(OctodTlsTest, GrpcOverTlsTrustsOnlyTheRightCa) {
  StartWithTls();
  const RunResult served = GenOverTcp({"--tls-ca", dir_.Path("ca.pem")});
  ASSERT_EQ(served.exit_code, 0) << served.err;
  EXPECT_EQ(TokenIds(served.out).size(), 3u);
  const RunResult wrong_ca = GenOverTcp({"--tls-ca", dir_.Path("other-ca.pem")});
  EXPECT_NE(wrong_ca.exit_code, 0) << "a certificate the client's CA did not sign";
  const RunResult plain = GenOverTcp({});
  EXPECT_NE(plain.exit_code, 0) << "a plain-text client on a TLS port";
  EXPECT_NE(octod_.Log().find("over TLS"), std::string::npos) << octod_.Log();
}

TEST_F(OctodTlsTest, HttpsTrustsOnlyTheRightCaAndRefusesPlainText) {
  if (!std::filesystem::exists("/usr/bin/curl")) GTEST_SKIP() << "curl is not installed";
  StartWithTls();
  const RunResult served = Curl(Https("/api/version"), {"--cacert", dir_.Path("ca.pem")});
  ASSERT_EQ(served.exit_code, 0) << served.err;
  EXPECT_NE(served.out.find("\"version\""), std::string::npos) << served.out;
  const RunResult completion = Curl(Https("/v1/completions"), {"--cacert", dir_.Path("ca.pem"), "-d",
                                                               R"({"model": "m", "prompt": "x", "max_tokens": 2})"});
  ASSERT_EQ(completion.exit_code, 0) << completion.err;
  EXPECT_NE(completion.out.find("\"completion_tokens\":2"), std::string::npos) << completion.out;
  EXPECT_EQ(Curl(Https("/api/version"), {"--cacert", dir_.Path("other-ca.pem")}).exit_code, 60)
      << "curl: the peer's certificate is not trusted";
  const RunResult plain = Curl(absl::StrCat("http://127.0.0.1:", http_port_, "/api/version"), {});
  EXPECT_NE(plain.exit_code, 0) << plain.out;
  EXPECT_EQ(plain.out.find("\"version\""), std::string::npos) << "no answer in plain text";
  EXPECT_EQ(Curl(Https("/api/version"), {"--cacert", dir_.Path("ca.pem")}).exit_code, 0) << "octod serves on";
}

TEST_F(OctodTlsTest, MutualTlsNeedsAClientCertificateTheCaSigned) {
  StartWithTls({"--tls-client-ca", dir_.Path("ca.pem")});
  const std::vector<std::string> client = {"--tls-cert", dir_.Path("client.pem"), "--tls-key", dir_.Path("client.key")};
  std::vector<std::string> with_cert = {"--tls-ca", dir_.Path("ca.pem")};
  with_cert.insert(with_cert.end(), client.begin(), client.end());
  const RunResult served = GenOverTcp(with_cert);
  ASSERT_EQ(served.exit_code, 0) << served.err;
  EXPECT_NE(GenOverTcp({"--tls-ca", dir_.Path("ca.pem")}).exit_code, 0) << "no client certificate";
  if (!std::filesystem::exists("/usr/bin/curl")) return;
  EXPECT_EQ(Curl(Https("/api/version"), {"--cacert", dir_.Path("ca.pem"), "--cert", dir_.Path("client.pem"), "--key",
                                         dir_.Path("client.key")})
                .exit_code,
            0);
  EXPECT_NE(Curl(Https("/api/version"), {"--cacert", dir_.Path("ca.pem")}).exit_code, 0) << "no client certificate";
}

TEST_F(OctodTlsTest, ListeningBeyondLoopbackWithoutTlsIsWarnedAbout) {
  ASSERT_TRUE(octod_.Start(ServeArgs("m", {"--http-listen", "0.0.0.0:0", "--token-file", token_file_})));
  EXPECT_NE(octod_.Log().find("warning: http-listen 0.0.0.0:0 is reachable from other machines without TLS"),
            std::string::npos)
      << octod_.Log();
}

TEST_F(OctodTlsTest, AKeyThatIsNotTheCertificatesIsNamedAtStart) {
  const RunResult r = RunCommand({OctodPath(), "--socket", dir_.Path("bad.sock"), "--models-root", ModelDir(""),
                                  "--model", "m", "--http-listen", "127.0.0.1:0", "--tls-cert", dir_.Path("server.pem"),
                                  "--tls-key", dir_.Path("client.key")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tls-key: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("key values mismatch"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace octo::testing
