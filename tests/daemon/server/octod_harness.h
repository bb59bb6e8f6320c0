// A real octod for end-to-end tests: the daemon built with this tree, run as
// a child process on a unix socket, driven by the real octo-gen and octo-ctl
// (tests/client/subprocess.h runs them), plus what those tests check
// afterwards: the loader process and the shared-memory rings octod leaves.
//
// Threads: an OctodProcess belongs to the test's thread; Gen and Ctl may be
// called from several threads at once (they only run processes).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/client/subprocess.h"
#include "tests/temp_dir.h"

namespace octo::testing {

// The binaries of this build.
const std::string& OctodPath();
const std::string& OctoGenPath();
const std::string& OctoCtlPath();

// Token ids of octo-gen --json's token events, in order.
std::vector<int> TokenIds(const std::string& json_lines);
// octo-gen --json's done event; a null json when the output has none.
nlohmann::json DoneEvent(const std::string& json_lines);

// A 64-bit field of a proto's JSON (written as a string) or a number.
uint64_t JsonU64(const nlohmann::json& value);

// `octo-ctl decompose -q gguf out_dir`.
::testing::AssertionResult Decompose(const std::string& gguf, const std::string& out_dir);
// The same, made once per test run for a given GGUF (model_cache.h).
::testing::AssertionResult CachedDecompose(const std::string& gguf, const std::string& out_dir);
// The in-process engine's greedy tokens: `octo-ctl run DIR PROMPT --temp 0
// -n N --tokens`. Empty (with a test failure) when octo-ctl fails.
std::vector<int> EngineTokens(const std::string& model_dir, const std::string& prompt, int max_tokens);
// Size of the largest layer_*.bin of a model directory: the smallest
// layer budget that streams every layer through one ring slot.
uint64_t LargestLayerFile(const std::string& model_dir);
// XORs the byte in the middle of `file` with 0x5a; a second call restores it.
void FlipMiddleByte(const std::string& file);

// /dev/shm entries of the rings octod `octod_pid` created (storage/ring.cc
// names them /octo-ring-<octod pid>-<counter>).
std::vector<std::string> RingSegmentsOf(pid_t octod_pid);
// True while `pid` runs; a zombie (ended, not yet reaped) does not run.
bool ProcessRuns(pid_t pid);
// Polls `condition` every 10 ms until it holds (true) or `timeout` passes.
bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// A command running in the background, its stdout and stderr in files, so
// that a test can watch its output while it runs.
class BackgroundRun {
 public:
  // Starts `argv`; its output goes to `file_prefix`.out and .err.
  BackgroundRun(const std::vector<std::string>& argv, const std::string& file_prefix);
  ~BackgroundRun();  // waits for the command when the test did not
  BackgroundRun(const BackgroundRun&) = delete;
  BackgroundRun& operator=(const BackgroundRun&) = delete;

  std::string Out() const;  // stdout so far
  RunResult Wait();         // waits for the end; then its exit code and output

 private:
  std::string out_path_, err_path_;
  pid_t pid_ = -1;
};

class OctodProcess {
 public:
  // octod will listen on `socket_path` and log to `log_path`.
  OctodProcess(std::string socket_path, std::string log_path);
  // A still-running octod is killed (SIGKILL) and reaped.
  ~OctodProcess();
  OctodProcess(const OctodProcess&) = delete;
  OctodProcess& operator=(const OctodProcess&) = delete;

  // Runs `octod --socket S --threads 2 args...` and waits (up to 30 s) until
  // it answers on the socket. Fails, with octod's log, when it exits first.
  ::testing::AssertionResult Start(const std::vector<std::string>& args);
  // SIGTERM: succeeds when octod exits 0 and removed its socket and rings.
  ::testing::AssertionResult Stop();
  // SIGKILL, then reaps it; the socket file stays, as after a crash.
  void Kill();

  pid_t pid() const { return pid_; }  // -1 when not started or ended
  const std::vector<pid_t>& started() const { return started_; }  // every pid it had
  const std::string& socket() const { return socket_; }
  std::string Log() const;            // what octod wrote to stderr so far
  // The port of octod's HTTP API, read from the "http: listening on
  // HOST:PORT" line the octod of the last Start wrote to the log (started
  // with --http-listen HOST:0); 0 when none shows within `timeout`.
  int HttpPort(std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

  // `octo-gen --socket S args...`.
  RunResult Gen(std::vector<std::string> args) const;
  // One octo-gen per element of `runs`, all at once; their results in order.
  std::vector<RunResult> GenConcurrently(const std::vector<std::vector<std::string>>& runs) const;
  // `octo-gen --socket S args...` in the background (output under `file_prefix`).
  std::unique_ptr<BackgroundRun> GenInBackground(std::vector<std::string> args, const std::string& file_prefix) const;
  // `octo-ctl COMMAND --socket S args...`.
  RunResult Ctl(const std::string& command, std::vector<std::string> args = {}) const;
  // `octo-ctl status --json`, parsed; a null json (and a test failure) when it fails.
  nlohmann::json Status() const;

 private:
  std::string socket_;
  std::string log_;
  size_t log_start_ = 0;  // the log's size when the last Start spawned octod (the log is appended to)
  pid_t pid_ = -1;
  std::vector<pid_t> started_;
};

// A test with its own temp dir (models root `root/`, octod's socket and log)
// and one octod. TearDown stops a running octod (SIGTERM: exit 0, socket and
// rings removed) and checks that no octod it ever started left a ring.
class OctodTest : public ::testing::Test {
 protected:
  OctodTest();
  void TearDown() override;

  std::string ModelDir(const std::string& name) const { return dir_.Path("root/" + name); }
  // Writes a generated "tiny" llama (Q4_K_M, random weights, seed 42) with
  // `n_layers` layers and decomposes it to root/NAME; another type, preset
  // or seed when given.
  void MakeModel(const std::string& name, int n_layers, const std::string& type = "Q4_K_M",
                 const std::string& preset = "tiny", uint64_t seed = 42);
  // root/NAME: SMALL's GGUF (made by MakeModel from "tiny") widened by
  // GenerateWidenedModel (tests/storage/test_models.h), so SMALL drafts for it.
  void MakeWidenedModel(const std::string& name, const std::string& small, int n_layers, float extra_layer_norm);
  // A generated MoE model (`preset`, e.g. "tiny-qwen3moe") with `n_experts` experts.
  void MakeMoeModel(const std::string& name, const std::string& preset, int n_layers, int n_experts);
  // octod flags: the models root, `model` loaded at start (none when
  // empty), `--backend cpu` unless `extra` names a backend, then `extra`.
  std::vector<std::string> ServeArgs(const std::string& model, std::vector<std::string> extra = {}) const;
  // Flags that stream every layer of `model` through one ring slot.
  std::vector<std::string> StreamEveryLayer(const std::string& model) const;

  TempDir dir_;
  OctodProcess octod_;
};

}  // namespace octo::testing
