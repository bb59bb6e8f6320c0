// The forward pass's side of speculative decoding, on the CPU backend and
// (built as cuda_draft_step_test, label cuda) the CUDA one:
//   - a draft tree's step: every row, seeing only its ancestors, gives the
//     bits its path gets decoded one token at a time, and once the accepted
//     path's rows are moved into place (KvCache::KeepRows) the cache decodes
//     on as if only that path had ever been fed;
//   - a hybrid model's checkpoint: a step that saves the recurrent state
//     part way gives the same logits, and cutting back to the checkpoint
//     and going on gives the bits of never having fed the rest;
//   - bad tree steps are refused, naming the defect.
#include <bit>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/engine/backend_setup.h"
#include "daemon/engine/draft_tree.h"
#include "daemon/engine/model.h"
#include "storage/decompose.h"
#include "tests/storage/test_models.h"
#include "tests/temp_dir.h"

#ifndef OCTO_TEST_BACKEND
#define OCTO_TEST_BACKEND "cpu"
#endif

namespace octo::testing {
namespace {

using Rows = std::vector<std::vector<float>>;

std::unique_ptr<Model> OpenGenerated(const TempDir& dir, const std::string& preset, const std::string& type,
                                     uint32_t layers) {
  const std::string name = preset + "-" + type + "-" + std::to_string(layers);
  if (!std::filesystem::exists(dir.Path(name))) {  // made once per suite
    const std::string gguf = dir.Path(name + ".gguf");
    GenerateModel(gguf, preset, type, [layers](ModelShape& s) { s.n_layers = layers; });
    const auto decomposed = Decompose(gguf, dir.Path(name), DecomposeOptions{});
    EXPECT_TRUE(decomposed.ok()) << decomposed.status();
  }
  ModelOptions options;
  options.backend = OCTO_TEST_BACKEND;
  options.n_threads = 2;
  auto model = Model::Open(dir.Path(name), options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

// One step of `step` (a single sequence); every row's logits.
absl::StatusOr<Rows> Step(Model& model, const SequenceStep& step) {
  std::vector<float> logits;
  absl::Status status = model.Forward(std::span<const SequenceStep>(&step, 1), logits);
  if (!status.ok()) return status;
  const size_t vocab = model.config().vocab_size;
  Rows rows;
  for (size_t at = 0; at + vocab <= logits.size(); at += vocab) rows.emplace_back(logits.begin() + at, logits.begin() + at + vocab);
  return rows;
}

void ExpectSameBits(const std::vector<float>& want, const std::vector<float>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(want[i]), std::bit_cast<uint32_t>(got[i])) << what << ", logit " << i;
  }
}

// A tree after the root: 3 children, then a mix of branching and chains,
// 14 nodes, depth 5.
DraftTree SampleTree(uint32_t vocab) {
  DraftTree tree;
  auto token = [vocab](int i) { return static_cast<int32_t>((37 + 53 * i) % vocab); };
  const int a = tree.Add(-1, token(0), 0), b = tree.Add(-1, token(1), 0), c = tree.Add(-1, token(2), 0);
  const int a1 = tree.Add(a, token(3), 0), a2 = tree.Add(a, token(4), 0), b1 = tree.Add(b, token(5), 0);
  tree.Add(c, token(6), 0);
  const int a11 = tree.Add(a1, token(7), 0), a21 = tree.Add(a2, token(8), 0);
  tree.Add(b1, token(9), 0);
  const int a111 = tree.Add(a11, token(10), 0);
  tree.Add(a11, token(11), 0);
  tree.Add(a21, token(12), 0);
  tree.Add(a111, token(13), 0);
  return tree;
}

// The root-to-node path of `node`, root first (the root token included).
std::vector<int32_t> PathTo(const DraftTree& tree, int32_t root, int node) {
  std::vector<int32_t> path;
  for (int i = node; i >= 0; i = tree.node(i).parent) path.insert(path.begin(), tree.node(i).token);
  path.insert(path.begin(), root);
  return path;
}

// A verification step's rows for `tree` after `root`: the root (bit 0),
// then every node in index order (node i at bit 1 + i), each row's mask its
// ancestors and itself.
struct TreeRows {
  std::vector<int32_t> tokens;
  std::vector<uint64_t> masks;
};
TreeRows RowsOf(const DraftTree& tree, int32_t root) {
  TreeRows rows{{root}, {1}};
  for (int i = 0; i < tree.size(); ++i) {
    rows.tokens.push_back(tree.node(i).token);
    rows.masks.push_back(tree.Mask(i, 1, 0));
  }
  return rows;
}

class DraftStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(OCTO_TEST_BACKEND) == "cuda" && UsableCudaDevices() == 0) GTEST_SKIP() << "no CUDA device";
  }
  static void SetUpTestSuite() { dir_ = new TempDir(); }
  static void TearDownTestSuite() { delete dir_; }
  static inline TempDir* dir_ = nullptr;
  const std::vector<int32_t> prompt_ = {1, 5, 77, 300, 12, 9, 401};
};

TEST_F(DraftStepTest, TreeRowsEqualTheirPathsDecodedOneTokenAtATime) {
  auto model = OpenGenerated(*dir_, "tiny", "Q4_K_M", 3);
  ASSERT_NE(model, nullptr);
  const uint32_t vocab = model->config().vocab_size;
  const DraftTree tree = SampleTree(vocab);
  const int32_t root = 250;

  std::unique_ptr<KvCache> kv = model->NewCache(128);
  ASSERT_TRUE(Step(*model, SequenceStep{.kv = kv.get(), .tokens = prompt_}).ok());
  const int base = kv->size();
  const TreeRows step = RowsOf(tree, root);
  auto rows = Step(*model, SequenceStep{.kv = kv.get(), .tokens = step.tokens, .all_logits = true,
                                       .tree_mask = step.masks, .tree_base = base});
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), step.tokens.size());

  for (int node = -1; node < tree.size(); ++node) {
    // A fresh cache: the prompt, then the path fed one token at a time.
    std::unique_ptr<KvCache> alone = model->NewCache(128);
    ASSERT_TRUE(Step(*model, SequenceStep{.kv = alone.get(), .tokens = prompt_}).ok());
    const std::vector<int32_t> path = node < 0 ? std::vector<int32_t>{root} : PathTo(tree, root, node);
    std::vector<float> last;
    for (int32_t t : path) {
      auto one = Step(*model, SequenceStep{.kv = alone.get(), .tokens = std::span<const int32_t>(&t, 1)});
      ASSERT_TRUE(one.ok()) << one.status();
      last = one->back();
    }
    ExpectSameBits(last, (*rows)[static_cast<size_t>(node + 1)], "tree row of node " + std::to_string(node));
  }
}

TEST_F(DraftStepTest, KeptPathDecodesOnAsIfAloneWasFed) {
  auto model = OpenGenerated(*dir_, "tiny", "Q4_K_M", 3);
  ASSERT_NE(model, nullptr);
  const DraftTree tree = SampleTree(model->config().vocab_size);
  const int32_t root = 250;
  const std::vector<int> kept = {1, 5, 9};  // b, b1, b11: a path through the middle of the rows
  std::unique_ptr<KvCache> kv = model->NewCache(128);
  ASSERT_TRUE(Step(*model, SequenceStep{.kv = kv.get(), .tokens = prompt_}).ok());
  const int base = kv->size();
  const TreeRows step = RowsOf(tree, root);
  ASSERT_TRUE(Step(*model, SequenceStep{.kv = kv.get(), .tokens = step.tokens, .all_logits = true,
                                       .tree_mask = step.masks, .tree_base = base})
                  .ok());
  std::vector<int> slots;
  for (int node : kept) slots.push_back(base + 1 + node);
  ASSERT_TRUE(kv->KeepRows(base + 1, slots).ok());
  EXPECT_EQ(kv->size(), base + 1 + static_cast<int>(kept.size()));

  std::unique_ptr<KvCache> plain = model->NewCache(128);
  std::vector<int32_t> fed = prompt_;
  fed.push_back(root);
  for (int node : kept) fed.push_back(tree.node(node).token);
  ASSERT_TRUE(Step(*model, SequenceStep{.kv = plain.get(), .tokens = fed}).ok());
  for (int32_t next : {17, 401, 3, 99}) {
    auto a = Step(*model, SequenceStep{.kv = kv.get(), .tokens = std::span<const int32_t>(&next, 1)});
    auto b = Step(*model, SequenceStep{.kv = plain.get(), .tokens = std::span<const int32_t>(&next, 1)});
    ASSERT_TRUE(a.ok() && b.ok());
    ExpectSameBits(b->back(), a->back(), "after the kept path, token " + std::to_string(next));
  }
}

TEST_F(DraftStepTest, BadTreeStepsAreRefusedByName) {
  auto model = OpenGenerated(*dir_, "tiny", "Q4_K_M", 3);
  ASSERT_NE(model, nullptr);
  std::unique_ptr<KvCache> kv = model->NewCache(256);
  std::vector<int32_t> long_prompt;
  for (int i = 0; i < 70; ++i) long_prompt.push_back(1 + (i * 7) % 500);
  ASSERT_TRUE(Step(*model, SequenceStep{.kv = kv.get(), .tokens = long_prompt}).ok());
  const int base = kv->size();
  const std::vector<int32_t> two = {5, 6};
  auto refused = [&](std::vector<uint64_t> masks, int tree_base, const std::string& words) {
    auto rows = Step(*model, SequenceStep{.kv = kv.get(), .tokens = two, .all_logits = true, .tree_mask = masks,
                                         .tree_base = tree_base});
    EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument) << words;
    EXPECT_NE(std::string(rows.status().message()).find(words), std::string::npos) << rows.status();
  };
  refused({1}, base, "masks for 2 tokens");
  refused({1, 1}, base, "must hold its own row");     // row 1 lacks bit 1
  refused({1, 7}, base, "must hold its own row");     // row 1 sees bit 2, after itself
  refused({1, 3}, base + 1, "tree_base");             // past the cache
  refused({1ull << 63, 3}, base - 63, "past tree_base");
  EXPECT_EQ(kv->size(), base) << "a refused step commits nothing";
}

TEST_F(DraftStepTest, HybridCheckpointRollsTheStateBack) {
  auto model = OpenGenerated(*dir_, "tiny-qwen35", "F32", 4);
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> draft = {40, 41, 42, 43};  // the pending token, then three drafts
  std::unique_ptr<KvCache> kv = model->NewCache(128), plain = model->NewCache(128);
  ASSERT_TRUE(Step(*model, SequenceStep{.kv = kv.get(), .tokens = prompt_}).ok());
  ASSERT_TRUE(Step(*model, SequenceStep{.kv = plain.get(), .tokens = prompt_}).ok());
  const int base = kv->size();
  auto with = Step(*model, SequenceStep{.kv = kv.get(), .tokens = draft, .all_logits = true, .checkpoint_rows = 2});
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(kv->checkpoint_position(), base + 2);
  // Its rows are those of one token at a time (a decoding session's).
  for (size_t i = 0; i < draft.size(); ++i) {
    auto one = Step(*model, SequenceStep{.kv = plain.get(), .tokens = std::span<const int32_t>(&draft[i], 1)});
    ASSERT_TRUE(one.ok());
    ExpectSameBits(one->back(), (*with)[i], "row " + std::to_string(i));
  }
  // Back to the checkpoint: as if only the first two had been fed (one at a
  // time, as a decoding session feeds them).
  EXPECT_EQ(kv->ReusablePrefix(base + 3), base + 2);
  ASSERT_TRUE(kv->Truncate(base + 2).ok());
  std::unique_ptr<KvCache> again = model->NewCache(128);
  ASSERT_TRUE(Step(*model, SequenceStep{.kv = again.get(), .tokens = prompt_}).ok());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(Step(*model, SequenceStep{.kv = again.get(), .tokens = std::span<const int32_t>(&draft[i], 1)}).ok());
  }
  for (int32_t next : {7, 8, 9}) {
    auto a = Step(*model, SequenceStep{.kv = kv.get(), .tokens = std::span<const int32_t>(&next, 1)});
    auto b = Step(*model, SequenceStep{.kv = again.get(), .tokens = std::span<const int32_t>(&next, 1)});
    ASSERT_TRUE(a.ok() && b.ok());
    ExpectSameBits(b->back(), a->back(), "after the checkpoint, token " + std::to_string(next));
  }
  // A tree step needs an attention-only model.
  const std::vector<uint64_t> masks = {1};
  auto tree = Step(*model, SequenceStep{.kv = kv.get(), .tokens = std::span<const int32_t>(draft.data(), 1),
                                       .tree_mask = masks, .tree_base = kv->size()});
  EXPECT_EQ(tree.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace octo::testing
