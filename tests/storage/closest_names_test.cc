// "Did you mean": typos of model names, flags and subcommands find what was
// meant, and unrelated words find nothing.
#include "storage/closest_names.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace octo {
namespace {

TEST(ClosestNamesTest, EditDistanceCountsASwapAsOneEdit) {
  EXPECT_EQ(EditDistance("status", "status"), 0u);
  EXPECT_EQ(EditDistance("stauts", "status"), 1u);
  EXPECT_EQ(EditDistance("temprature", "temperature"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(ClosestNamesTest, TyposFindWhatWasMeantClosestFirst) {
  const std::vector<std::string> commands = {"status", "residency", "load", "unload", "models", "health", "sessions"};
  EXPECT_EQ(ClosestNames("stauts", commands), std::vector<std::string>{"status"});
  EXPECT_EQ(ClosestNames("modles", commands), std::vector<std::string>{"models"});
  EXPECT_EQ(ClosestNames("laod", commands), std::vector<std::string>{"load"});
  EXPECT_EQ(ClosestNames("sesion", commands), std::vector<std::string>{"sessions"});
  EXPECT_TRUE(ClosestNames("perplexity", commands).empty());
  const std::vector<std::string> models = {"llama-3.2-1b", "llama-3.2-3b.gguf", "qwen2/7b", "tiny"};
  EXPECT_EQ(ClosestNames("llama", models), (std::vector<std::string>{"llama-3.2-1b", "llama-3.2-3b.gguf"}));
  EXPECT_EQ(ClosestNames("QWEN2/7B", models), std::vector<std::string>{"qwen2/7b"}) << "case is ignored";
}

TEST(ClosestNamesTest, DidYouMeanListsTheNames) {
  EXPECT_EQ(DidYouMean({}), "");
  EXPECT_EQ(DidYouMean({"a"}), "; did you mean 'a'?");
  EXPECT_EQ(DidYouMean({"a", "b", "c"}), "; did you mean 'a', 'b' or 'c'?");
}

}  // namespace
}  // namespace octo
