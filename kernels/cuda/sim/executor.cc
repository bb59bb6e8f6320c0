#include "kernels/cuda/sim/executor.h"

#include <cstdlib>

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/cuda/sim/thread_context.h"

namespace octo::cuda_sim {
namespace {

struct sigaction previous_segv, previous_bus;

// A fault in a kernel, a stream operation or host code: say who touched
// what, then let the previous handler (AddressSanitizer's report) or the
// default action end the process.
void OnFault(int sig, siginfo_t* info, void*) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  std::string who;
  if (tls_thread != nullptr) {
    who = RunningThreadName();
  } else if (tls_stream_op != nullptr) {
    who = *tls_stream_op;
  } else {
    who = "host code";
  }
  std::string what = Executor::Get().memory().ExplainFault(address);
  if (what.empty()) what = absl::StrFormat("0x%x is not device memory the executor knows", address);
  const std::string line =
      absl::StrFormat("octo cuda_sim: %s: bad memory access at 0x%x: %s\n", who, address, what);
  (void)!write(STDERR_FILENO, line.data(), line.size());
  sigaction(sig, sig == SIGSEGV ? &previous_segv : &previous_bus, nullptr);
}

// The errors the executor returns: name and text, as the runtime spells them.
struct ErrorText {
  cudaError_t error;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrorTexts[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
};
constexpr ErrorText kUnknownError = {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"};

const ErrorText& TextOf(cudaError_t error) {
  for (const ErrorText& e : kErrorTexts) {
    if (e.error == error) return e;
  }
  return kUnknownError;
}

}  // namespace

Executor& Executor::Get() {
  static Executor* const executor = new Executor();  // never destroyed: see executor.h
  return *executor;
}

// The defaults, with the environment's overrides (config.h): so a test can
// start octod on a small device, or with slow copies, without code in octod.
Config ConfigFromEnvironment() {
  Config c;
  if (const char* v = std::getenv("OCTO_SIM_DEVICE_MEMORY"); v != nullptr && *v != '\0') {
    c.device_memory_bytes = std::strtoull(v, nullptr, 10);
  }
  if (const char* v = std::getenv("OCTO_SIM_COPY_DELAY_US"); v != nullptr && *v != '\0') {
    c.copy_delay = std::chrono::microseconds(std::strtoll(v, nullptr, 10));
  }
  if (const char* v = std::getenv("OCTO_SIM_PINNABLE_MEMORY"); v != nullptr && *v != '\0') {
    c.pinnable_bytes = std::strtoull(v, nullptr, 10);
  }
  return c;
}

Executor::Executor()
    : config_(ConfigFromEnvironment()),
      memory_(config_.device_memory_bytes),
      legacy_(std::make_unique<CUstream_st>(true, "the legacy default stream")) {
  InstallFaultHandler();
}

void Executor::InstallFaultHandler() {
  struct sigaction action {};
  action.sa_sigaction = OnFault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &previous_segv);
  sigaction(SIGBUS, &action, &previous_bus);
}

Config Executor::config() {
  std::lock_guard<std::mutex> lock(mu_);
  return config_;
}

absl::Status Executor::SetConfig(const Config& config) {
  if (config.copy_delay.count() < 0 || config.host_threads < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cuda_sim config: copy_delay (%d us) and host_threads (%d) must be >= 0", config.copy_delay.count(),
        config.host_threads));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (grids_ != nullptr && config.host_threads != config_.host_threads) {
    return absl::FailedPreconditionError("cuda_sim config: host_threads is fixed by the first launch");
  }
  if (!memory_.SetCapacity(config.device_memory_bytes)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cuda_sim config: device_memory_bytes (%d) is below what is allocated (%d)", config.device_memory_bytes,
        memory_.used()));
  }
  config_ = config;
  return absl::OkStatus();
}

GridRunner& Executor::grids() {
  std::lock_guard<std::mutex> lock(mu_);
  if (grids_ == nullptr) {
    int n = config_.host_threads;
    if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
    grids_ = std::make_unique<GridRunner>(n > 0 ? n : 1);
  }
  return *grids_;
}

bool Executor::IsStream(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  return stream == nullptr || streams_.count(stream) != 0;
}

cudaStream_t Executor::CreateStream(bool blocking) {
  std::lock_guard<std::mutex> lock(mu_);
  auto* stream = new CUstream_st(blocking, absl::StrFormat("stream %d", next_stream_++));
  streams_.insert(stream);
  return stream;
}

void Executor::DestroyStream(cudaStream_t stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.erase(stream);
  }
  // The legacy stream may hold a wait on it; let that run first.
  legacy_->WaitDone(legacy_->last_ticket());
  delete stream;  // runs what is still queued on it, then stops its thread
}

uint64_t Executor::Enqueue(cudaStream_t stream, std::string what, std::function<void()> op, bool always) {
  CUstream_st* s = Resolve(stream);
  // The legacy default stream waits for all blocking streams, and they for it.
  std::vector<std::pair<CUstream_st*, uint64_t>> waits;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto capture = captures_.find(s); capture != captures_.end()) {
      capture->second.ops.push_back(CapturedOp{std::move(what), std::move(op), always});
      return 0;
    }
    if (s == legacy_.get()) {
      for (CUstream_st* other : streams_) {
        if (other->blocking()) waits.emplace_back(other, other->last_ticket());
      }
    } else if (s->blocking()) {
      waits.emplace_back(legacy_.get(), legacy_->last_ticket());
    }
  }
  return s->Enqueue(std::move(what), [this, waits = std::move(waits), op = std::move(op), always] {
    for (const auto& [other, ticket] : waits) other->WaitDone(ticket);
    if (!always && sticky_error() != cudaSuccess) return;
    op();
  });
}

void Executor::SynchronizeAll() {
  std::vector<CUstream_st*> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.assign(streams_.begin(), streams_.end());
  }
  all.push_back(legacy_.get());
  for (CUstream_st* s : all) s->WaitDone(s->last_ticket());
}

cudaError_t Executor::sticky_error() {
  std::lock_guard<std::mutex> lock(mu_);
  return sticky_;
}

void Executor::Fail(cudaError_t error, const std::string& description) {
  std::fprintf(stderr, "octo cuda_sim: %s\n", description.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  if (sticky_ != cudaSuccess) return;
  sticky_ = error;
  sticky_description_ = description;
}

void Executor::ClearStickyError() {
  std::lock_guard<std::mutex> lock(mu_);
  sticky_ = cudaSuccess;
  sticky_description_.clear();
}

const char* Executor::ErrorString(cudaError_t error) {
  static std::mutex texts_mu;
  static std::set<std::string>* const texts = new std::set<std::string>();  // pointers handed out stay valid
  std::string text = TextOf(error).text;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error == sticky_ && !sticky_description_.empty()) text += ": " + sticky_description_;
  }
  std::lock_guard<std::mutex> lock(texts_mu);
  return texts->insert(std::move(text)).first->c_str();
}

const char* Executor::ErrorName(cudaError_t error) { return TextOf(error).name; }

Config GetConfig() { return Executor::Get().config(); }
absl::Status SetConfig(const Config& config) { return Executor::Get().SetConfig(config); }

}  // namespace octo::cuda_sim
