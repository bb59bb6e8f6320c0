#include "daemon/server/config.h"

#include <sys/stat.h>

#include <fstream>

#include "gtest/gtest.h"
#include "tests/temp_dir.h"

namespace octo {
namespace {

// The credential `token` is to `config`; "" when it is none.
std::string CredentialOf(const OctodConfig& config, const std::string& token) {
  const std::optional<Caller> caller = config.credentials.Match("Bearer " + token);
  return caller.has_value() ? caller->credential : "";
}

class ConfigTest : public ::testing::Test {
 protected:
  ConfigTest() {
    std::filesystem::create_directories(dir_.Path("models/tiny"));
    WriteFile("token", "0123456789abcdef0123", 0600);
  }

  std::string WriteFile(const std::string& name, const std::string& text, mode_t mode = 0644) {
    const std::string path = dir_.Path(name);
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }

  // The arguments every test needs, then `more`.
  std::vector<std::string> Args(std::vector<std::string> more) {
    std::vector<std::string> args = {"--models-root", dir_.Path("models"), "--socket", dir_.Path("octod.sock")};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  void ExpectError(const std::vector<std::string>& more, absl::string_view key) {
    const absl::StatusOr<OctodConfig> config = ParseOctodConfig(Args(more));
    ASSERT_FALSE(config.ok()) << "accepted: " << ::testing::PrintToString(more);
    EXPECT_NE(config.status().message().find(key), absl::string_view::npos)
        << "the message should name '" << key << "': " << config.status();
  }

  testing::TempDir dir_;
};

TEST_F(ConfigTest, DefaultsAreTheRuntimeDefaults) {
  const absl::StatusOr<OctodConfig> config = ParseOctodConfig(Args({}));
  ASSERT_TRUE(config.ok()) << config.status();
  const RuntimeOptions defaults;
  const RuntimeOptions& runtime = config->runtime;
  EXPECT_EQ(runtime.models_root, std::filesystem::canonical(dir_.Path("models")).string());
  EXPECT_EQ(runtime.model, "");
  EXPECT_EQ(runtime.n_threads, defaults.n_threads);
  EXPECT_EQ(runtime.allow_simd, defaults.allow_simd);
  // octod picks the device when there is one; a Runtime made in code (tests,
  // embedders) stays on the CPU unless told.
  EXPECT_EQ(runtime.backend, "auto");
  EXPECT_EQ(defaults.backend, "cpu");
  EXPECT_EQ(runtime.gpu, defaults.gpu);
  EXPECT_EQ(runtime.vram_budget_bytes, defaults.vram_budget_bytes);
  EXPECT_EQ(runtime.staging_buffers, defaults.staging_buffers);
  EXPECT_TRUE(runtime.cuda_graphs);
  EXPECT_EQ(runtime.cuda_graphs, defaults.cuda_graphs);
  EXPECT_EQ(runtime.pin_first, defaults.pin_first);
  EXPECT_EQ(runtime.pin_last, defaults.pin_last);
  EXPECT_EQ(runtime.layer_budget_bytes, defaults.layer_budget_bytes);
  EXPECT_EQ(runtime.auto_budget_bytes, defaults.auto_budget_bytes);
  EXPECT_EQ(runtime.ring_slots, defaults.ring_slots);
  EXPECT_EQ(runtime.expert_cache_bytes, defaults.expert_cache_bytes);
  EXPECT_EQ(runtime.expert_cache_bytes, kAutoExpertCache);
  EXPECT_EQ(runtime.direct_io, defaults.direct_io);
  EXPECT_EQ(runtime.kv_budget_bytes, defaults.kv_budget_bytes);
  EXPECT_EQ(runtime.kv_types, KvCacheTypes{}) << "f16 keys and values";
  EXPECT_EQ(runtime.session_context, defaults.session_context);
  EXPECT_EQ(runtime.max_sessions, defaults.max_sessions);
  EXPECT_EQ(runtime.evict_idle_sessions, defaults.evict_idle_sessions);
  EXPECT_EQ(runtime.prefill_chunk, defaults.prefill_chunk);
  EXPECT_EQ(std::filesystem::path(runtime.loader_path).filename(), "octo-loader");
  EXPECT_EQ(config->socket_path, dir_.Path("octod.sock"));
  EXPECT_TRUE(config->listen.empty());
  EXPECT_FALSE(config->credentials.any());
}

TEST_F(ConfigTest, EveryFlagReachesItsField) {
  const absl::StatusOr<OctodConfig> config = ParseOctodConfig(Args(
      {"--model", "tiny", "--threads", "3", "--portable", "--pin-first", "2", "--pin-last", "0", "--layer-budget",
       "4GiB", "--memory-limit", "12G", "--ring-slots", "4", "--no-direct-io", "--kv-budget", "512M",
       "--cache-type-k", "Q8_0", "--cache-type-v", "q4_0", "--session-context", "8192", "--max-sessions", "5", "--evict-idle-sessions", "--prefill-chunk", "128",
       "--listen", "127.0.0.1:7070", "--token-file", dir_.Path("token"), "--backend", "cuda", "--gpu", "3",
       "--vram-budget", "60GiB", "--staging-buffers", "4", "--no-cuda-graphs", "--expert-cache", "3GiB"}));
  ASSERT_TRUE(config.ok()) << config.status();
  const RuntimeOptions& runtime = config->runtime;
  EXPECT_FALSE(runtime.cuda_graphs);
  EXPECT_EQ(runtime.model, "tiny");
  EXPECT_EQ(runtime.n_threads, 3);
  EXPECT_FALSE(runtime.allow_simd);
  EXPECT_EQ(runtime.backend, "cuda");
  EXPECT_EQ(runtime.gpu, 3);
  EXPECT_EQ(runtime.vram_budget_bytes, 60ull << 30);
  EXPECT_EQ(runtime.staging_buffers, 4u);
  EXPECT_EQ(runtime.pin_first, 2u);
  EXPECT_EQ(runtime.pin_last, 0u);
  EXPECT_EQ(runtime.layer_budget_bytes, 4ull << 30);
  EXPECT_EQ(runtime.auto_budget_bytes, 12ull << 30);
  EXPECT_EQ(runtime.ring_slots, 4u);
  EXPECT_EQ(runtime.expert_cache_bytes, 3ull << 30);
  EXPECT_FALSE(runtime.direct_io);
  EXPECT_EQ(runtime.kv_budget_bytes, 512ull << 20);
  EXPECT_EQ(runtime.kv_types, (KvCacheTypes{GgmlType::kQ8_0, GgmlType::kQ4_0}));
  EXPECT_EQ(runtime.session_context, 8192u);
  EXPECT_EQ(runtime.max_sessions, 5u);
  EXPECT_TRUE(runtime.evict_idle_sessions);
  EXPECT_EQ(runtime.prefill_chunk, 128u);
  EXPECT_EQ(config->listen, "127.0.0.1:7070");
  EXPECT_EQ(CredentialOf(*config, "0123456789abcdef0123"), "token:1");
}

TEST_F(ConfigTest, CorsOriginsAddToTheLocalDefaults) {
  absl::StatusOr<OctodConfig> config = ParseOctodConfig(Args({}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->http_cors_origins, DefaultCorsOrigins());
  config = ParseOctodConfig(Args({"--http-cors-origins", "https://chat.example.com,chrome-extension://*"}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(OriginAllowed(config->http_cors_origins, "https://chat.example.com"));
  EXPECT_TRUE(OriginAllowed(config->http_cors_origins, "chrome-extension://abcdef"));
  EXPECT_TRUE(OriginAllowed(config->http_cors_origins, "http://localhost:5173")) << "the defaults stay";
  EXPECT_FALSE(OriginAllowed(config->http_cors_origins, "https://evil.example.com"));
  ExpectError({"--http-cors-origins", "https://a.example.com,has space"}, "http-cors-origins: origin 'has space'");
  ExpectError({"--http-cors-origins", std::string(300, 'a')}, "http-cors-origins: origin");
}

TEST_F(ConfigTest, FileSetsValuesAndFlagsWin) {
  const std::string file = WriteFile("octod.toml",
                                     "# octod settings\n"
                                     "model = \"tiny\"\n"
                                     "ring-slots = 5\n"
                                     "layer-budget = \"2GiB\"\n"
                                     "direct-io = false\n"
                                     "max-sessions = 9\n");
  const absl::StatusOr<OctodConfig> from_file = ParseOctodConfig(Args({"--config", file}));
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->runtime.model, "tiny");
  EXPECT_EQ(from_file->runtime.ring_slots, 5u);
  EXPECT_EQ(from_file->runtime.layer_budget_bytes, 2ull << 30);
  EXPECT_FALSE(from_file->runtime.direct_io);
  EXPECT_EQ(from_file->runtime.max_sessions, 9u);

  const absl::StatusOr<OctodConfig> flags_win =
      ParseOctodConfig(Args({"--ring-slots", "3", "--config", file, "--layer-budget", "auto", "--direct-io"}));
  ASSERT_TRUE(flags_win.ok()) << flags_win.status();
  EXPECT_EQ(flags_win->runtime.ring_slots, 3u);
  EXPECT_EQ(flags_win->runtime.layer_budget_bytes, 0u) << "auto";
  EXPECT_TRUE(flags_win->runtime.direct_io);
  EXPECT_EQ(flags_win->runtime.max_sessions, 9u) << "not given as a flag: the file's";
}

TEST_F(ConfigTest, BadFileContentsAreNamed) {
  ExpectError({"--config", WriteFile("typo.toml", "ring-slot = 3\n")}, "ring-slot");
  ExpectError({"--config", WriteFile("range.toml", "ring-slots = 0\n")}, "ring-slots: 0 is out of range [1, 16]");
  ExpectError({"--config", WriteFile("size.toml", "kv-budget = \"lots\"\n")}, "kv-budget: 'lots'");
  ExpectError({"--config", dir_.Path("missing.toml")}, "missing.toml");
}

TEST_F(ConfigTest, EveryBadValueIsNamed) {
  ExpectError({"--threads", "-1"}, "threads: -1 is out of range");
  ExpectError({"--threads", "5000"}, "threads: 5000");
  ExpectError({"--threads", "many"}, "--threads");
  ExpectError({"--pin-first", "-2"}, "pin-first");
  ExpectError({"--pin-last", "100000"}, "pin-last");
  ExpectError({"--layer-budget", "0"}, "layer-budget");
  ExpectError({"--layer-budget", "4 gigs"}, "layer-budget: '4 gigs' is not a size");
  ExpectError({"--memory-limit", "-5G"}, "memory-limit");
  ExpectError({"--ring-slots", "0"}, "ring-slots: 0 is out of range [1, 16]");
  ExpectError({"--ring-slots", "17"}, "ring-slots");
  ExpectError({"--expert-cache", "lots"}, "expert-cache: 'lots' is not a size");
  ExpectError({"--expert-cache", "-1G"}, "expert-cache");
  ExpectError({"--expert-cache", "AUTO"}, "expert-cache");
  ExpectError({"--kv-budget", "auto"}, "kv-budget") ;
  ExpectError({"--kv-budget", "0"}, "kv-budget");
  ExpectError({"--cache-type-k", "q4_k"}, "cache-type-k: 'q4_k' is not a KV cache type (f16, q8_0, q4_0, q4_1)");
  ExpectError({"--cache-type-v", "fp8"}, "cache-type-v: 'fp8' is not a KV cache type");
  ExpectError({"--config", WriteFile("kv.toml", "cache-type-k = \"q2\"\n")}, "cache-type-k: 'q2'");
  ExpectError({"--session-context", "0"}, "session-context");
  ExpectError({"--max-sessions", "0"}, "max-sessions");
  ExpectError({"--max-loaded-models", "0"}, "max-loaded-models: 0 is out of range [1, 64]");
  ExpectError({"--keep-alive", "soon"}, "keep-alive: 'soon' is not a duration");
  ExpectError({"--keep-alive", "-5m"}, "keep-alive");
  ExpectError({"--session-idle-timeout", "-1h"}, "session-idle-timeout");
  ExpectError({"--prefill-chunk", "0"}, "prefill-chunk");
  ExpectError({"--model", "../escape"}, "model: '../escape' leaves models-root");
  ExpectError({"--model", "/abs/tiny"}, "model: '/abs/tiny' must be relative");
  ExpectError({"--loader", dir_.Path("no-loader")}, "loader: no file");
  ExpectError({"--loader", WriteFile("not-exec", "#!/bin/sh\n", 0644)}, "loader: ");
  ExpectError({"--listen", "localhost"}, "listen: 'localhost' is not host:port");
  ExpectError({"--listen", "localhost:0"}, "listen: 'localhost:0': the port");
  ExpectError({"--listen", "::1:80"}, "listen:");
  ExpectError({"--listen", "127.0.0.1:7070"}, "token-file: required with listen");
  ExpectError({"--no-such-flag"}, "--no-such-flag");
}

TEST_F(ConfigTest, SeveralModelsAndTheirKeepAlive) {
  absl::StatusOr<OctodConfig> config = ParseOctodConfig(Args({}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->runtime.max_loaded_models, 3u);
  EXPECT_EQ(config->runtime.keep_alive, absl::InfiniteDuration()) << "forever: until room is needed";
  config = ParseOctodConfig(Args({"--max-loaded-models", "5", "--keep-alive", "30m"}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->runtime.max_loaded_models, 5u);
  EXPECT_EQ(config->runtime.keep_alive, absl::Minutes(30));
  for (const char* forever : {"forever", "-1"}) {
    config = ParseOctodConfig(Args({"--keep-alive", forever}));
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->runtime.keep_alive, absl::InfiniteDuration()) << forever;
  }
  config = ParseOctodConfig(Args({"--keep-alive", "90"}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->runtime.keep_alive, absl::Seconds(90));
}

// Unlike the budgets, an expert cache of 0 is a setting: no cache.
TEST_F(ConfigTest, ExpertCacheTakesAutoZeroAndSizes) {
  absl::StatusOr<OctodConfig> config = ParseOctodConfig(Args({"--expert-cache", "auto"}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->runtime.expert_cache_bytes, kAutoExpertCache);
  config = ParseOctodConfig(Args({"--expert-cache", "0"}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->runtime.expert_cache_bytes, 0u);
  config = ParseOctodConfig(Args({"--expert-cache", "512M"}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->runtime.expert_cache_bytes, 512ull << 20);

  const std::string file = WriteFile("moe.toml", "expert-cache = \"6GiB\"\n");
  config = ParseOctodConfig(Args({"--config", file}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->runtime.expert_cache_bytes, 6ull << 30);
  config = ParseOctodConfig(Args({"--config", file, "--expert-cache", "auto"}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->runtime.expert_cache_bytes, kAutoExpertCache) << "the flag wins";
  ExpectError({"--config", WriteFile("bad-moe.toml", "expert-cache = \"half\"\n")}, "expert-cache: 'half'");
}

TEST_F(ConfigTest, BackendSettingsAcceptTheirRanges) {
  for (const char* backend : {"auto", "cuda", "cpu"}) {
    const absl::StatusOr<OctodConfig> config = ParseOctodConfig(Args({"--backend", backend}));
    ASSERT_TRUE(config.ok()) << backend << ": " << config.status();
    EXPECT_EQ(config->runtime.backend, backend);
  }
  absl::StatusOr<OctodConfig> config =
      ParseOctodConfig(Args({"--gpu", "0", "--vram-budget", "auto", "--staging-buffers", "2"}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->runtime.gpu, 0);
  EXPECT_EQ(config->runtime.vram_budget_bytes, 0u) << "auto";
  EXPECT_EQ(config->runtime.staging_buffers, 2u);
  config = ParseOctodConfig(Args({"--gpu", "63", "--vram-budget", "512M", "--staging-buffers", "16"}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->runtime.gpu, 63);
  EXPECT_EQ(config->runtime.vram_budget_bytes, 512ull << 20);
  EXPECT_EQ(config->runtime.staging_buffers, 16u);

  const std::string file = WriteFile("cuda.toml",
                                     "backend = \"cuda\"\n"
                                     "gpu = 1\n"
                                     "vram-budget = \"20GiB\"\n"
                                     "staging-buffers = 3\n");
  config = ParseOctodConfig(Args({"--config", file}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->runtime.backend, "cuda");
  EXPECT_EQ(config->runtime.gpu, 1);
  EXPECT_EQ(config->runtime.vram_budget_bytes, 20ull << 30);
  EXPECT_EQ(config->runtime.staging_buffers, 3u);
}

TEST_F(ConfigTest, BadBackendSettingsAreNamed) {
  ExpectError({"--backend", "gpu"}, "backend: 'gpu' is not one of auto, cuda, cpu");
  ExpectError({"--backend", "CUDA"}, "backend: 'CUDA'");
  ExpectError({"--backend", ""}, "backend: ''");
  ExpectError({"--gpu", "-1"}, "gpu: -1 is out of range [0, 63]");
  ExpectError({"--gpu", "64"}, "gpu: 64 is out of range [0, 63]");
  ExpectError({"--gpu", "first"}, "--gpu");
  ExpectError({"--vram-budget", "0"}, "vram-budget: '0' is not a size such as 4GiB or 512M, or auto");
  ExpectError({"--vram-budget", "lots"}, "vram-budget: 'lots'");
  ExpectError({"--vram-budget", "-1G"}, "vram-budget");
  ExpectError({"--staging-buffers", "1"}, "staging-buffers: 1 is out of range [2, 16]");
  ExpectError({"--staging-buffers", "17"}, "staging-buffers: 17 is out of range [2, 16]");
  ExpectError({"--config", WriteFile("backend.toml", "backend = \"rocm\"\n")}, "backend: 'rocm'");
  ExpectError({"--config", WriteFile("staging.toml", "staging-buffers = 0\n")}, "staging-buffers: 0");
}

TEST_F(ConfigTest, SocketPathMustFitASocketAddress) {
  const absl::StatusOr<OctodConfig> config =
      ParseOctodConfig({"--models-root", dir_.Path("models"), "--socket", "/tmp/" + std::string(120, 's')});
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("socket: the socket path is 125 bytes; a unix socket path holds at most 107"),
            absl::string_view::npos)
      << config.status();
  const absl::StatusOr<OctodConfig> relative =
      ParseOctodConfig({"--models-root", dir_.Path("models"), "--socket", "octod.sock"});
  ASSERT_TRUE(relative.ok()) << relative.status();
  EXPECT_EQ(relative->socket_path, (std::filesystem::current_path() / "octod.sock").string());
}

TEST_F(ConfigTest, ModelsRootMustExistOrBeImpliedByModel) {
  EXPECT_EQ(ParseOctodConfig({"--models-root", dir_.Path("nowhere")}).status().code(), absl::StatusCode::kNotFound);
  const absl::StatusOr<OctodConfig> none = ParseOctodConfig({"--socket", dir_.Path("s")});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("models-root: required"), absl::string_view::npos) << none.status();
  // A model directory alone: its parent is the models root.
  const absl::StatusOr<OctodConfig> implied = ParseOctodConfig({"--model", dir_.Path("models/tiny")});
  ASSERT_TRUE(implied.ok()) << implied.status();
  EXPECT_EQ(implied->runtime.models_root, std::filesystem::canonical(dir_.Path("models")).string());
  EXPECT_EQ(implied->runtime.model, "tiny");
}

TEST_F(ConfigTest, TokenFileMustBePrivateAndLongEnough) {
  const std::string listen = "[::1]:7070";
  ExpectError({"--listen", listen, "--token-file", WriteFile("open", "0123456789abcdef0123", 0644)},
              "token-file: ");
  ExpectError({"--listen", listen, "--token-file", WriteFile("short", "abc\n", 0600)},
              "token-file: the token on line 1 of");
  ExpectError({"--listen", listen, "--token-file", WriteFile("empty", "\n\n", 0600)}, "holds no token");
  ExpectError({"--listen", listen, "--token-file", WriteFile("spaces", "0123456789 abcdef0123", 0600)},
              "whitespace");
  ExpectError({"--listen", listen, "--token-file", dir_.Path("absent")}, "token-file: cannot read");
  const absl::StatusOr<OctodConfig> ok =
      ParseOctodConfig(Args({"--listen", listen, "--token-file", WriteFile("good", "\n0123456789abcdef0123\n", 0640)}));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(CredentialOf(*ok, "0123456789abcdef0123"), "token:1") << "surrounding whitespace is not part of the token";
}

TEST_F(ConfigTest, EachLineOfTheTokenFileIsACredentialAndTheAdminTokenIsApart) {
  const std::string tokens = WriteFile("tokens", "alice-0123456789abcdef\n\n  bob-0123456789abcdef  \n", 0600);
  const std::string admin = WriteFile("admin", "admin-0123456789abcdef\n", 0600);
  const absl::StatusOr<OctodConfig> config =
      ParseOctodConfig(Args({"--listen", "[::1]:7070", "--token-file", tokens, "--admin-token-file", admin}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(CredentialOf(*config, "alice-0123456789abcdef"), "token:1");
  EXPECT_EQ(CredentialOf(*config, "bob-0123456789abcdef"), "token:2");
  EXPECT_EQ(CredentialOf(*config, "admin-0123456789abcdef"), "admin");
  EXPECT_TRUE(config->credentials.Match("bearer admin-0123456789abcdef")->admin) << "the scheme's case is free";
  EXPECT_FALSE(config->credentials.Match("Bearer alice-0123456789abcdef")->admin);
  EXPECT_FALSE(config->credentials.Match("Bearer carol-0123456789abcdef").has_value());
  EXPECT_FALSE(config->credentials.Match("alice-0123456789abcdef").has_value()) << "no scheme";
  ExpectError({"--admin-token-file", WriteFile("two", "a-0123456789abcdef\nb-0123456789abcdef\n", 0600)},
              "admin-token-file: must hold exactly one token");
  ExpectError({"--token-file", tokens, "--admin-token-file", WriteFile("same", "bob-0123456789abcdef", 0600)},
              "admin-token-file: its token is also in token-file");
}

TEST_F(ConfigTest, HttpIsOffUnlessAskedAndNeedsATokenBeyondLoopback) {
  absl::StatusOr<OctodConfig> config = ParseOctodConfig(Args({}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->http.has_value()) << "off by default";
  config = ParseOctodConfig(Args({"--http-listen", "127.0.0.1:11434"}));
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->http.has_value());
  EXPECT_EQ(config->http->port, 11434);
  EXPECT_TRUE(config->http->loopback);
  EXPECT_FALSE(config->credentials.any()) << "loopback needs no token";
  ExpectError({"--http-listen", "0.0.0.0:11434"}, "http-listen: '0.0.0.0:11434' is reachable from other machines");
  ExpectError({"--http-listen", "11434"}, "http-listen: '11434' is not host:port");
  ExpectError({"--http-listen", "localhost:99999"}, "http-listen: ");
  config = ParseOctodConfig(
      Args({"--http-listen", "0.0.0.0:0", "--token-file", WriteFile("token", "0123456789abcdef0123", 0600)}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->http->loopback);
  EXPECT_EQ(CredentialOf(*config, "0123456789abcdef0123"), "token:1");
}

}  // namespace
}  // namespace octo
