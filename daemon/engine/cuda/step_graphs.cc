#include "daemon/engine/cuda/step_graphs.h"

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
  recording_ = enabled;
}

absl::Status StepGraphs::Queue(absl::AnyInvocable<absl::Status()> launch) {
  if (recording_) {
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

absl::Status StepGraphs::Flush() {
  recording_ = false;
  return RunKept();
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

absl::Status StepGraphs::EndPass() {
  std::string signature = std::exchange(signature_, {});
  const bool recorded = recording_;
  recording_ = enabled_;
  if (!recorded) {
    eager_passes_.fetch_add(1, std::memory_order_relaxed);
    last_signature_ = std::move(signature);
    return absl::OkStatus();
  }
  if (kept_.empty()) return absl::OkStatus();  // nothing since the last end (a second Download)
  for (auto it = graphs_.begin(); it != graphs_.end(); ++it) {
    if (it->signature != signature) continue;
    graphs_.splice(graphs_.begin(), graphs_, it);
    kept_.clear();
    replays_.fetch_add(1, std::memory_order_relaxed);
    last_signature_ = std::move(signature);
    return GraphCall(cudaGraphLaunch(graphs_.front().exec, stream_), "cudaGraphLaunch");
  }
  if (signature != last_signature_) {
    eager_passes_.fetch_add(1, std::memory_order_relaxed);
    last_signature_ = std::move(signature);
    return RunKept();
  }
  cudaGraphExec_t exec = nullptr;
  if (absl::Status s = Capture(&exec); !s.ok()) return s;
  captures_.fetch_add(1, std::memory_order_relaxed);
  if (graphs_.size() == kMaxGraphs) {
    cudaGraphExecDestroy(graphs_.back().exec);
    graphs_.pop_back();
  }
  graphs_.push_front(Graph{signature, exec});
  replays_.fetch_add(1, std::memory_order_relaxed);
  return GraphCall(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
}

}  // namespace octo
