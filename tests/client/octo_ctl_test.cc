// octo-ctl decompose / verify / inspect as a user runs them: a real process,
// exit codes, what it prints, and what a signal leaves behind.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "tests/client/subprocess.h"
#include "tests/shared_data.h"
#include "tests/storage/test_models.h"

namespace octo {
namespace {

namespace fs = std::filesystem;
using ::octo::testing::RunCommand;
using ::octo::testing::RunResult;
using ::octo::testing::TempDir;

const std::string kCtl = OCTO_CTL_PATH;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(OctoCtlTest, DecomposeVerifyInspect) {
  TempDir tmp;
  testing::GenerateModel(tmp.Path("m.gguf"), "tiny-qwen2", "Q4_K_M");

  RunResult dec = RunCommand({kCtl, "decompose", tmp.Path("m.gguf"), tmp.Path("m")});
  ASSERT_EQ(dec.exit_code, 0) << dec.err;
  EXPECT_TRUE(Contains(dec.out, "qwen2, 2 layers, dim 256")) << dec.out;
  // Not a terminal: plain lines, no carriage returns or escape codes.
  EXPECT_TRUE(Contains(dec.err, "decompose: ")) << dec.err;
  EXPECT_FALSE(Contains(dec.err, "\r"));
  EXPECT_FALSE(Contains(dec.err, "\033"));

  RunResult ver = RunCommand({kCtl, "verify", tmp.Path("m")});
  EXPECT_EQ(ver.exit_code, 0) << ver.out << ver.err;
  EXPECT_TRUE(Contains(ver.out, "OK ")) << ver.out;

  RunResult gguf = RunCommand({kCtl, "inspect", tmp.Path("m.gguf")});
  EXPECT_EQ(gguf.exit_code, 0) << gguf.err;
  EXPECT_TRUE(Contains(gguf.out, "GGUF version 3"));
  EXPECT_TRUE(Contains(gguf.out, "general.architecture"));
  EXPECT_TRUE(Contains(gguf.out, "blk.1.attn_q.bias"));
  EXPECT_TRUE(Contains(gguf.out, "Q6_K"));

  RunResult dir = RunCommand({kCtl, "inspect", tmp.Path("m")});
  EXPECT_EQ(dir.exit_code, 0) << dir.err;
  EXPECT_TRUE(Contains(dir.out, "rope neox"));
  EXPECT_TRUE(Contains(dir.out, "tokenizer.ggml.merges"));
  EXPECT_TRUE(Contains(dir.out, "layer_001.bin"));
}

TEST(OctoCtlTest, VerifyNamesTheBadFileAndFails) {
  TempDir tmp;
  testing::GenerateModel(tmp.Path("m.gguf"), "tiny", "Q8_0");
  ASSERT_EQ(RunCommand({kCtl, "decompose", "-q", tmp.Path("m.gguf"), tmp.Path("m")}).exit_code, 0);
  {
    std::fstream f(tmp.Path("m/layer_001.bin"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10000);
    f.put('\x7f');
  }
  RunResult ver = RunCommand({kCtl, "verify", tmp.Path("m")});
  EXPECT_EQ(ver.exit_code, 1);
  EXPECT_TRUE(Contains(ver.out, "FAIL layer_001.bin: checksum mismatch")) << ver.out;
  EXPECT_TRUE(Contains(ver.out, "FAILED")) << ver.out;
}

TEST(OctoCtlTest, BadInputGetsAClearErrorAndExitCode) {
  TempDir tmp;
  std::ofstream(tmp.Path("junk.gguf")) << "this is not a model";
  RunResult junk = RunCommand({kCtl, "decompose", tmp.Path("junk.gguf"), tmp.Path("out")});
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_TRUE(Contains(junk.err, "not a GGUF file")) << junk.err;
  EXPECT_FALSE(fs::exists(tmp.Path("out")));

  RunResult inspect = RunCommand({kCtl, "inspect", tmp.Path("junk.gguf")});
  EXPECT_EQ(inspect.exit_code, 1);
  EXPECT_TRUE(Contains(inspect.err, "not a GGUF file")) << inspect.err;

  RunResult missing = RunCommand({kCtl, "decompose", tmp.Path("nope.gguf"), tmp.Path("out")});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_TRUE(Contains(missing.err, "nope.gguf")) << missing.err;

  RunResult not_a_model = RunCommand({kCtl, "verify", tmp.path().string()});
  EXPECT_EQ(not_a_model.exit_code, 1);
  EXPECT_TRUE(Contains(not_a_model.out, "FAIL manifest.json")) << not_a_model.out;

  RunResult no_command = RunCommand({kCtl});
  EXPECT_NE(no_command.exit_code, 0);
}

TEST(OctoCtlTest, DecomposeRefusesToOverwriteWithoutForce) {
  TempDir tmp;
  testing::GenerateModel(tmp.Path("m.gguf"), "tiny", "Q4_0");
  ASSERT_EQ(RunCommand({kCtl, "decompose", "-q", tmp.Path("m.gguf"), tmp.Path("m")}).exit_code, 0);
  RunResult again = RunCommand({kCtl, "decompose", "-q", tmp.Path("m.gguf"), tmp.Path("m")});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_TRUE(Contains(again.err, "already exists; pass --force")) << again.err;
  EXPECT_EQ(RunCommand({kCtl, "decompose", "-q", "--force", tmp.Path("m.gguf"), tmp.Path("m")}).exit_code, 0);
}

// The file system refuses a write midway (here the file-size limit, EFBIG,
// a real kernel refusal as ENOSPC would be): octo-ctl says which file and
// why, exits 1, and leaves no directory that could pass for a model.
TEST(OctoCtlTest, DecomposeThatCannotWriteSaysWhyAndLeavesNothing) {
  TempDir tmp;
  testing::GenerateModel(tmp.Path("m.gguf"), "tiny", "F32");
  // SIGXFSZ ignored (inherited across exec), so the write fails with EFBIG
  // instead of killing the process; 512 KiB: the embeddings fit, a layer does not.
  const RunResult r = RunCommand({"/bin/bash", "-c",
                                  "trap '' XFSZ; ulimit -f 512; exec \"$0\" decompose -q \"$1\" \"$2\"", kCtl,
                                  tmp.Path("m.gguf"), tmp.Path("m")});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("File too large"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(".bin"), std::string::npos) << "names the file: " << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.Path("m")));
  for (const auto& entry : std::filesystem::directory_iterator(tmp.path())) {
    EXPECT_EQ(entry.path().filename(), "m.gguf") << "left behind: " << entry.path();
  }
  EXPECT_NE(RunCommand({kCtl, "verify", tmp.Path("m")}).exit_code, 0);
}

TEST(OctoCtlTest, ProgressBarOnATerminal) {
  TempDir tmp;
  testing::GenerateModel(tmp.Path("m.gguf"), "tiny", "F32");
  RunResult dec = testing::RunOnTerminal({kCtl, "decompose", tmp.Path("m.gguf"), tmp.Path("m")});
  ASSERT_EQ(dec.exit_code, 0) << dec.out;
  EXPECT_TRUE(Contains(dec.out, "decompose [")) << dec.out;
  EXPECT_TRUE(Contains(dec.out, "ETA")) << dec.out;
  EXPECT_TRUE(Contains(dec.out, "/s")) << dec.out;
}

// A model big enough that decompose is still running when the test signals it.
class OctoCtlSignalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::GenerateModel(tmp_.Path("big.gguf"), "tiny", "F32", [](testing::ModelShape& s) { s.n_layers = 48; });
  }
  // Starts decompose and waits until its partial directory exists.
  pid_t StartAndWaitForPartial() {
    pid_t pid = testing::StartCommand({kCtl, "decompose", tmp_.Path("big.gguf"), tmp_.Path("out")});
    const std::string partial = tmp_.Path(".out.partial-" + std::to_string(pid));
    for (int i = 0; i < 2000 && !fs::exists(partial + "/layer_001.bin"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(fs::exists(partial)) << "decompose finished too fast to interrupt";
    return pid;
  }
  TempDir tmp_;
};

TEST_F(OctoCtlSignalTest, CtrlCStopsAndCleansUp) {
  pid_t pid = StartAndWaitForPartial();
  kill(pid, SIGINT);
  EXPECT_EQ(testing::WaitCommand(pid), 1);
  EXPECT_FALSE(fs::exists(tmp_.Path("out")));
  EXPECT_FALSE(fs::exists(tmp_.Path(".out.partial-" + std::to_string(pid))));
}

TEST_F(OctoCtlSignalTest, KillNineNeverLeavesADirectoryThatVerifies) {
  pid_t pid = StartAndWaitForPartial();
  kill(pid, SIGKILL);
  EXPECT_EQ(testing::WaitCommand(pid), 128 + SIGKILL);
  EXPECT_FALSE(fs::exists(tmp_.Path("out")));
  const std::string partial = tmp_.Path(".out.partial-" + std::to_string(pid));
  RunResult ver = RunCommand({kCtl, "verify", partial});
  EXPECT_EQ(ver.exit_code, 1) << ver.out;
  // The next run cleans up after the killed one and succeeds.
  ASSERT_EQ(RunCommand({kCtl, "decompose", "-q", tmp_.Path("big.gguf"), tmp_.Path("out")}).exit_code, 0);
  EXPECT_FALSE(fs::exists(partial));
  EXPECT_EQ(RunCommand({kCtl, "verify", "-q", tmp_.Path("out")}).exit_code, 0);
}

TEST(OctoCtlTest, InspectRefusesGgufVersionOne) {
  OCTO_REQUIRE_SHARED("models/legacy/tinyllamas-stories-260k-f32.gguf");
  RunResult r = RunCommand({kCtl, "inspect", testing::SharedPath("models/legacy/tinyllamas-stories-260k-f32.gguf")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "GGUF version 1 is not supported")) << r.err;
}

}  // namespace
}  // namespace octo
