#include "daemon/engine/cuda/step_graphs.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace octo {
namespace {

absl::Status GraphCall(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();  // not sticky: clear it
  return absl::InternalError(absl::StrCat(what, " failed: ", cudaGetErrorName(error), " (",
                                          cudaGetErrorString(error), ")"));
}

}  // namespace

StepGraphs::~StepGraphs() {
  for (Graph& g : graphs_) cudaGraphExecDestroy(g.exec);
}

void StepGraphs::set_enabled(bool enabled) {
  Flush().IgnoreError();  // a kept launch's error shows at the pass's Download anyway (a fault is sticky)
  enabled_ = enabled;
}

absl::Status StepGraphs::Pause() {
  paused_ = true;
  return Flush();
}

absl::Status StepGraphs::EndPass() {
  absl::Status s = Flush();
  paused_ = false;
  in_pass_ = false;
  return s;
}

absl::Status StepGraphs::Queue(absl::AnyInvocable<absl::Status()> launch) {
  if (keeping()) {
    kept_.push_back(std::move(launch));
    return absl::OkStatus();
  }
  return launch();
}

absl::Status StepGraphs::RunKept() {
  std::vector<absl::AnyInvocable<absl::Status()>> kept = std::exchange(kept_, {});
  for (auto& launch : kept) {
    if (absl::Status s = launch(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status StepGraphs::Capture(cudaGraphExec_t* exec) {
  // Thread-local mode: the loader's threads may use the runtime meanwhile.
  if (absl::Status s = GraphCall(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                                 "cudaStreamBeginCapture");
      !s.ok()) {
    return s;
  }
  const absl::Status ran = RunKept();
  cudaGraph_t graph = nullptr;
  const absl::Status ended = GraphCall(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
  absl::Status s = !ran.ok() ? ran : ended;
  if (s.ok()) s = GraphCall(cudaGraphInstantiate(exec, graph, 0), "cudaGraphInstantiate");
  if (graph != nullptr) cudaGraphDestroy(graph);
  return s;
}

absl::Status StepGraphs::Flush() {
  std::string signature = std::exchange(signature_, {});
  if (kept_.empty()) return absl::OkStatus();
  for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
    if (it->signature != signature) continue;
    graphs_.splice(graphs_.begin(), graphs_, it);
    kept_.clear();
    replays_.fetch_add(1, std::memory_order_relaxed);
    return GraphCall(cudaGraphLaunch(graphs_.front().exec, stream_), "cudaGraphLaunch");
  }
  const auto seen = std::find(seen_.begin(), seen_.end(), signature);
  if (seen == seen_.end()) {
    eager_stretches_.fetch_add(1, std::memory_order_relaxed);
    if (seen_.size() == kMaxSeen) seen_.pop_front();
    seen_.push_back(std::move(signature));
    return RunKept();
  }
  seen_.erase(seen);
  cudaGraphExec_t exec = nullptr;
  if (absl::Status s = Capture(&exec); !s.ok()) return s;
  captures_.fetch_add(1, std::memory_order_relaxed);
  if (graphs_.size() == kMaxGraphs) {
    cudaGraphExecDestroy(graphs_.back().exec);
    graphs_.pop_back();
  }
  graphs_.push_front(Graph{std::move(signature), exec});
  replays_.fetch_add(1, std::memory_order_relaxed);
  return GraphCall(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
}

}  // namespace octo
