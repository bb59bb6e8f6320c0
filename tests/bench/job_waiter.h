// What the runtime benchmarks share: a TokenSink to wait on (a job's token
// ids, final status and stats), and RunJobs, which runs jobs together and
// gives their aggregate decode rate.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/runtime.h"

namespace octo {

struct JobWaiter : TokenSink {
  void OnStarted(const std::string&, int) override {}
  void OnToken(const GeneratedToken& t) override {
    std::lock_guard<std::mutex> lock(mu);
    tokens.push_back(t.id);
  }
  void OnDone(const absl::Status& s, const std::string&, const std::string&, const JobStats& st) override {
    std::lock_guard<std::mutex> lock(mu);
    status = s;
    stats = st;
    done = true;
    cv.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status status;
  JobStats stats;
  std::vector<int32_t> tokens;
};

struct JobsRun {
  bool submitted = true;  // no job was refused
  bool ok = true;         // every job submitted and finished without error
  std::vector<std::shared_ptr<JobWaiter>> jobs;
  double generated = 0;  // tokens, all jobs
  // Aggregate decode tokens/s: each job's tokens after its first (the
  // prompt's pass decides that one) over the slowest job's decode seconds.
  double decode_tokens_per_second = 0;
};

// `n` greedy jobs of max_tokens tokens, prompts "A", "B", ...
inline std::vector<GenerateJob> GreedyLetterJobs(int n, int max_tokens) {
  std::vector<GenerateJob> jobs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    jobs[i].prompt = std::string(1, static_cast<char>('A' + i));
    jobs[i].sampling.temperature = 0;
    jobs[i].sampling.max_tokens = max_tokens;
  }
  return jobs;
}

// Submits `jobs` at once and waits for them all. A refused job ends the run
// there; refusals and failed jobs are printed to stderr.
inline JobsRun RunJobs(Runtime& runtime, const std::vector<GenerateJob>& jobs) {
  JobsRun run;
  for (const GenerateJob& job : jobs) {
    run.jobs.push_back(std::make_shared<JobWaiter>());
    if (absl::StatusOr<std::shared_ptr<JobHandle>> h = runtime.Submit(job, run.jobs.back()); !h.ok()) {
      std::fprintf(stderr, "submit: %s\n", h.status().ToString().c_str());
      run.submitted = run.ok = false;
      return run;
    }
  }
  double decoded = 0, longest = 0;
  for (const std::shared_ptr<JobWaiter>& j : run.jobs) {
    j->Wait();
    if (!j->status.ok()) {
      std::fprintf(stderr, "job: %s\n", j->status.ToString().c_str());
      run.ok = false;
    }
    run.generated += j->stats.generated_tokens;
    decoded += std::max(0, j->stats.generated_tokens - 1);
    longest = std::max(longest, j->stats.decode_seconds);
  }
  run.decode_tokens_per_second = longest > 0 ? decoded / longest : 0;
  return run;
}

}  // namespace octo
