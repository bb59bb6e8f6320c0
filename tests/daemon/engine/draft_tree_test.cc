// DraftTree: the shape of a draft (speculative decoding) and the masks its
// verification step gives each row, and GrowLevel's choice of candidates.
#include "daemon/engine/draft_tree.h"

#include <gtest/gtest.h>

namespace octo {
namespace {

TEST(DraftTreeTest, MasksHoldAncestorsAndSelfOnly) {
  DraftTree tree;
  const int a = tree.Add(-1, 10, -0.1), b = tree.Add(-1, 11, -0.2);
  const int a1 = tree.Add(a, 12, -0.3), b1 = tree.Add(b, 13, -0.4);
  const int a11 = tree.Add(a1, 14, -0.5);
  EXPECT_EQ(tree.node(a11).depth, 3);
  EXPECT_EQ(tree.depth(), 3);
  EXPECT_FALSE(tree.linear());
  // Verification rows: the root is bit 0, node i bit 1 + i.
  EXPECT_EQ(tree.Mask(a11, 1, 0), 0b101011u);  // root, a, a1, a11
  EXPECT_EQ(tree.Mask(b1, 1, 0), 0b10101u);     // root, b, b1
  // The draft's own rows: no root bit, node i at bit i.
  EXPECT_EQ(tree.Mask(b1, 0, -1), 0b1010u);
  EXPECT_EQ(tree.Child(-1, 11), b);
  EXPECT_EQ(tree.Child(a, 13), -1);
  EXPECT_EQ(tree.Level(2), (std::vector<int>{a1, b1}));
  EXPECT_EQ(tree.Tokens(3), (std::vector<int32_t>{10, 11, 12}));
}

TEST(DraftTreeTest, AChainIsLinear) {
  DraftTree tree;
  for (int i = 0; i < 5; ++i) tree.Add(i - 1, 100 + i, 0);
  EXPECT_TRUE(tree.linear());
  EXPECT_EQ(tree.depth(), 5);
  EXPECT_EQ(tree.Mask(4, 1, 0), 0b111111u);
}

TEST(DraftTreeTest, GrowLevelKeepsTheMostLikelyPathsWithinWidthAndRoom) {
  DraftTree tree;
  const int a = tree.Add(-1, 1, -0.1), b = tree.Add(-1, 2, -1.0);
  // a's children: -0.1 + {-0.2, -2.0}; b's: -1.0 + {-0.05, -0.3}.
  const std::vector<std::vector<TokenLogprob>> top = {{{20, -0.2, ""}, {21, -2.0, ""}, {22, -3.0, ""}},
                                                      {{30, -0.05, ""}, {31, -0.3, ""}}};
  const std::vector<int> added = GrowLevel(tree, {a, b}, top, /*branches=*/2, /*width=*/3, /*room=*/10);
  ASSERT_EQ(added.size(), 3u);
  // Kept: a/20 (-0.3), b/30 (-1.05), b/31 (-1.3); a/21 (-2.1) and a/22 (past the branches) are not.
  EXPECT_EQ(tree.node(added[0]).token, 20);
  EXPECT_EQ(tree.node(added[1]).token, 30);
  EXPECT_EQ(tree.node(added[2]).token, 31);
  EXPECT_DOUBLE_EQ(tree.node(added[1]).logprob, -1.05);
  EXPECT_EQ(tree.node(added[2]).parent, b);
  // Room below the width caps it.
  DraftTree small;
  const std::vector<int> one = GrowLevel(small, {-1}, {{{5, -0.1, ""}, {6, -0.2, ""}}}, 2, 4, /*room=*/1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(small.node(one[0]).token, 5);
  // Equal paths: the earlier parent, then the better rank.
  DraftTree tied;
  const int x = tied.Add(-1, 1, -1.0), y = tied.Add(-1, 2, -1.0);
  const std::vector<int> two = GrowLevel(tied, {x, y}, {{{7, -0.5, ""}}, {{8, -0.5, ""}}}, 1, 1, 5);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(tied.node(two[0]).token, 7);
}

}  // namespace
}  // namespace octo
