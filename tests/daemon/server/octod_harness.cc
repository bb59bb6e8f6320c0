#include "tests/daemon/server/octod_harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/server/endpoint.h"
#include "storage/xxhash64.h"
#include "tests/storage/test_models.h"
#include "tests/tools/model_cache.h"

namespace octo::testing {
namespace {

constexpr auto kStartTimeout = std::chrono::seconds(30);
constexpr auto kStopTimeout = std::chrono::seconds(20);

int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// waitpid that gives up after `timeout`; the exit code, or nullopt.
std::optional<int> WaitWithTimeout(pid_t pid, std::chrono::milliseconds timeout) {
  std::optional<int> code;
  WaitFor(
      [&] {
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) != pid) return false;
        code = ExitCode(status);
        return true;
      },
      timeout);
  return code;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// fork + exec of `argv` with stdout to `out_path` and stderr to `err_path`
// (appended; the same file may be both). The pid, or -1.
pid_t Spawn(std::vector<std::string> argv, const std::string& out_path, const std::string& err_path) {
  std::vector<char*> c_argv;
  for (std::string& arg : argv) c_argv.push_back(arg.data());
  c_argv.push_back(nullptr);
  // Opened before the fork, close-on-exec: the child only dups and execs,
  // and no other child inherits them.
  const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  pid_t pid = -1;
  if (out_fd >= 0 && err_fd >= 0) pid = ::fork();
  if (pid == 0) {
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    ::execv(c_argv[0], c_argv.data());
    ::_exit(127);
  }
  if (out_fd >= 0) ::close(out_fd);
  if (err_fd >= 0) ::close(err_fd);
  return pid;
}

}  // namespace

const std::string& OctodPath() {
  static const std::string path = OCTOD_PATH;
  return path;
}
const std::string& OctoGenPath() {
  static const std::string path = OCTO_GEN_PATH;
  return path;
}
const std::string& OctoCtlPath() {
  static const std::string path = OCTO_CTL_PATH;
  return path;
}

std::vector<int> TokenIds(const std::string& json_lines) {
  std::vector<int> ids;
  std::istringstream lines(json_lines);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
    if (event.is_object() && event.value("event", "") == "token") ids.push_back(event["id"].get<int>());
  }
  return ids;
}

nlohmann::json DoneEvent(const std::string& json_lines) {
  std::istringstream lines(json_lines);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
    if (event.is_object() && event.value("event", "") == "done") return event;
  }
  return nullptr;
}

uint64_t JsonU64(const nlohmann::json& value) {
  if (value.is_string()) return std::stoull(value.get<std::string>());
  return value.is_number() ? value.get<uint64_t>() : 0;
}

::testing::AssertionResult Decompose(const std::string& gguf, const std::string& out_dir) {
  const RunResult r = RunCommand({OctoCtlPath(), "decompose", "-q", gguf, out_dir});
  if (r.exit_code == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "octo-ctl decompose " << gguf << " exited " << r.exit_code << ": " << r.err;
}

std::vector<int> EngineTokens(const std::string& model_dir, const std::string& prompt, int max_tokens) {
  const RunResult r = RunCommand(
      {OctoCtlPath(), "run", model_dir, prompt, "--temp", "0", "-n", std::to_string(max_tokens), "--tokens"});
  if (r.exit_code != 0) {
    ADD_FAILURE() << "octo-ctl run " << model_dir << " exited " << r.exit_code << ": " << r.err;
    return {};
  }
  std::vector<int> ids;
  std::istringstream words(r.out);
  for (int id = 0; words >> id;) ids.push_back(id);
  return ids;
}

uint64_t LargestLayerFile(const std::string& model_dir) {
  uint64_t largest = 0;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir)) {
    if (entry.path().filename().string().rfind("layer_", 0) == 0) largest = std::max<uint64_t>(largest, entry.file_size());
  }
  return largest;
}

std::vector<std::string> RingSegmentsOf(pid_t octod_pid) {
  const std::string prefix = "octo-ring-" + std::to_string(octod_pid) + "-";
  std::vector<std::string> names;
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  ::closedir(dir);
  return names;
}

bool ProcessRuns(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  // "pid (comm) S ...": the state follows the last ')' (comm may hold one).
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

BackgroundRun::BackgroundRun(const std::vector<std::string>& argv, const std::string& file_prefix)
    : out_path_(file_prefix + ".out"), err_path_(file_prefix + ".err") {
  std::filesystem::remove(out_path_);
  std::filesystem::remove(err_path_);
  pid_ = Spawn(argv, out_path_, err_path_);
  if (pid_ < 0) ADD_FAILURE() << "cannot start " << argv[0];
}

BackgroundRun::~BackgroundRun() {
  if (pid_ > 0) Wait();
}

std::string BackgroundRun::Out() const { return ReadFile(out_path_); }

RunResult BackgroundRun::Wait() {
  RunResult result;
  if (pid_ > 0) {
    result.exit_code = WaitCommand(pid_);
    pid_ = -1;
  }
  result.out = ReadFile(out_path_);
  result.err = ReadFile(err_path_);
  return result;
}

OctodProcess::OctodProcess(std::string socket_path, std::string log_path)
    : socket_(std::move(socket_path)), log_(std::move(log_path)) {}

OctodProcess::~OctodProcess() {
  if (pid_ > 0) Kill();
}

::testing::AssertionResult OctodProcess::Start(const std::vector<std::string>& args) {
  if (pid_ > 0) return ::testing::AssertionFailure() << "octod is already running";
  std::vector<std::string> argv = {OctodPath(), "--socket", socket_, "--threads", "2"};
  argv.insert(argv.end(), args.begin(), args.end());
  log_start_ = ReadFile(log_).size();
  const pid_t pid = Spawn(std::move(argv), log_, log_);
  if (pid < 0) return ::testing::AssertionFailure() << "cannot start octod (log " << log_ << ")";
  pid_ = pid;
  started_.push_back(pid);
  std::optional<int> exited;
  const bool answers = WaitFor(
      [&] {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
          exited = ExitCode(status);
          return true;
        }
        return UnixSocketAnswers(socket_);
      },
      kStartTimeout);
  if (exited.has_value()) {
    pid_ = -1;
    return ::testing::AssertionFailure() << "octod exited " << *exited << " at start:\n" << Log();
  }
  if (!answers) return ::testing::AssertionFailure() << "octod did not answer within 30 s:\n" << Log();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult OctodProcess::Stop() {
  if (pid_ <= 0) return ::testing::AssertionFailure() << "octod is not running";
  const pid_t pid = pid_;
  ::kill(pid, SIGTERM);
  const std::optional<int> code = WaitWithTimeout(pid, kStopTimeout);
  if (!code.has_value()) {
    Kill();
    return ::testing::AssertionFailure() << "octod did not stop within 20 s of SIGTERM:\n" << Log();
  }
  pid_ = -1;
  if (*code != 0) return ::testing::AssertionFailure() << "octod exited " << *code << ":\n" << Log();
  if (std::filesystem::exists(socket_)) return ::testing::AssertionFailure() << "octod left its socket behind";
  if (!RingSegmentsOf(pid).empty()) {
    return ::testing::AssertionFailure() << "octod left /dev/shm/" << RingSegmentsOf(pid).front() << " behind";
  }
  return ::testing::AssertionSuccess();
}

void OctodProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

std::string OctodProcess::Log() const { return ReadFile(log_); }

int OctodProcess::HttpPort(std::chrono::milliseconds timeout) const {
  const std::regex listening("http: listening on [^ ]*:([0-9]+)");
  int port = 0;
  WaitFor(
      [&] {
        // This octod's line: after a restart the log holds the earlier
        // one's too, which may be all it holds until the new one's HTTP
        // server is up (octod answers on its socket first).
        const std::string all = Log();
        const std::string log = all.size() > log_start_ ? all.substr(log_start_) : std::string();
        for (auto it = std::sregex_iterator(log.begin(), log.end(), listening); it != std::sregex_iterator(); ++it) {
          port = std::stoi((*it)[1]);
        }
        return port != 0;
      },
      timeout);
  return port;
}

RunResult OctodProcess::Gen(std::vector<std::string> args) const {
  args.insert(args.begin(), {OctoGenPath(), "--socket", socket_});
  return RunCommand(args);
}

std::vector<RunResult> OctodProcess::GenConcurrently(const std::vector<std::vector<std::string>>& runs) const {
  std::vector<RunResult> results(runs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < runs.size(); ++i) threads.emplace_back([&, i] { results[i] = Gen(runs[i]); });
  for (std::thread& thread : threads) thread.join();
  return results;
}

std::unique_ptr<BackgroundRun> OctodProcess::GenInBackground(std::vector<std::string> args,
                                                             const std::string& file_prefix) const {
  args.insert(args.begin(), {OctoGenPath(), "--socket", socket_});
  return std::make_unique<BackgroundRun>(args, file_prefix);
}

RunResult OctodProcess::Ctl(const std::string& command, std::vector<std::string> args) const {
  args.insert(args.begin(), {OctoCtlPath(), command, "--socket", socket_});
  return RunCommand(args);
}

nlohmann::json OctodProcess::Status() const {
  const RunResult r = Ctl("status", {"--json"});
  nlohmann::json status = nlohmann::json::parse(r.out, nullptr, false);
  if (r.exit_code != 0 || !status.is_object()) {
    ADD_FAILURE() << "octo-ctl status exited " << r.exit_code << ": " << r.err << r.out;
    return nullptr;
  }
  return status;
}

OctodTest::OctodTest() : octod_(dir_.Path("octod.sock"), dir_.Path("octod.log")) {
  std::filesystem::create_directories(dir_.Path("root"));
}

void OctodTest::TearDown() {
  if (octod_.pid() > 0) {
    EXPECT_TRUE(octod_.Stop());
  }
  for (pid_t pid : octod_.started()) {
    WaitFor([&] { return RingSegmentsOf(pid).empty(); }, std::chrono::seconds(2));
    for (const std::string& ring : RingSegmentsOf(pid)) ADD_FAILURE() << "octod " << pid << " left /dev/shm/" << ring;
  }
  if (HasFailure()) std::cerr << "octod's log:\n" << octod_.Log();
}

::testing::AssertionResult CachedDecompose(const std::string& gguf, const std::string& out_dir) {
  // Keyed by the GGUF's bytes: the same file decomposes to the same directory.
  std::ifstream in(gguf, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key =
      absl::StrCat("dir-", absl::Hex(Xxh64Hash({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()})));
  ::testing::AssertionResult result = ::testing::AssertionSuccess();
  const absl::Status made = CachedOrMade(key, out_dir, [&](const std::string& where) {
    result = Decompose(gguf, where);
    return result ? absl::OkStatus() : absl::InternalError(result.message());
  });
  if (!made.ok()) return ::testing::AssertionFailure() << made;
  return ::testing::AssertionSuccess();
}

void OctodTest::MakeModel(const std::string& name, int n_layers, const std::string& type, const std::string& preset,
                          uint64_t seed) {
  const std::string gguf = dir_.Path(name + ".gguf");
  GenerateModel(gguf, preset, type, [&](ModelShape& shape) { shape.n_layers = n_layers; }, seed);
  ASSERT_TRUE(CachedDecompose(gguf, ModelDir(name)));
}

void OctodTest::MakeWidenedModel(const std::string& name, const std::string& small, int n_layers,
                                 float extra_layer_norm) {
  const std::string gguf = dir_.Path(name + ".gguf");
  GenerateWidenedModel(dir_.Path(small + ".gguf"), gguf, n_layers, extra_layer_norm);
  ASSERT_TRUE(CachedDecompose(gguf, ModelDir(name)));
}

void OctodTest::MakeMoeModel(const std::string& name, const std::string& preset, int n_layers, int n_experts) {
  const std::string gguf = dir_.Path(name + ".gguf");
  GenerateModel(gguf, preset, "Q4_K_M", [&](ModelShape& shape) {
    shape.n_layers = n_layers;
    shape.n_experts = n_experts;
  });
  ASSERT_TRUE(CachedDecompose(gguf, ModelDir(name)));
}

std::vector<std::string> OctodTest::ServeArgs(const std::string& model, std::vector<std::string> extra) const {
  std::vector<std::string> args = {"--models-root", dir_.Path("root")};
  if (!model.empty()) args.insert(args.end(), {"--model", model});
  // The CPU backend unless the test names one: its tokens are compared with
  // the in-process engine's, which runs on the CPU (a GPU box would
  // otherwise serve them from CUDA).
  if (std::find(extra.begin(), extra.end(), "--backend") == extra.end()) args.insert(args.end(), {"--backend", "cpu"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void FlipMiddleByte(const std::string& file) {
  const auto middle = static_cast<std::streamoff>(std::filesystem::file_size(file) / 2);
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(middle);
  const char byte = static_cast<char>(f.get() ^ 0x5a);
  f.seekp(middle);
  f.put(byte);
}

std::vector<std::string> OctodTest::StreamEveryLayer(const std::string& model) const {
  return {"--pin-first", "0", "--pin-last", "0", "--layer-budget", std::to_string(LargestLayerFile(ModelDir(model)))};
}

}  // namespace octo::testing
