// The exact prompt text of every family for one conversation, written from
// each family's published format (model cards and the Jinja templates they
// ship, rendered by Hugging Face's apply_chat_template), not from our table.
#include <set>
#include <string>
#include <vector>

#include "daemon/chat/chat_template.h"
#include "gtest/gtest.h"

namespace octo {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse."},
    {"user", "Hi"},
    {"assistant", "Hello."},
    {"user", "Name a color."},
};

struct FamilyCase {
  std::string name;
  bool renders_bos;
  std::string expected;  // kConversation with add_generation_prompt
};

void PrintTo(const FamilyCase& c, std::ostream* os) { *os << c.name; }

// DeepSeek's special tokens use U+FF5C (fullwidth vertical line) and U+2581.
#define DS_BOS "<\uFF5Cbegin\u2581of\u2581sentence\uFF5C>"
#define DS_EOS "<\uFF5Cend\u2581of\u2581sentence\uFF5C>"
#define DS_USER "<\uFF5CUser\uFF5C>"
#define DS_ASSISTANT "<\uFF5CAssistant\uFF5C>"

const FamilyCase kCases[] = {
    {"chatml", false,
     "<|im_start|>system\nYou are terse.<|im_end|>\n"
     "<|im_start|>user\nHi<|im_end|>\n"
     "<|im_start|>assistant\nHello.<|im_end|>\n"
     "<|im_start|>user\nName a color.<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {"phi4", false,
     "<|im_start|>system<|im_sep|>You are terse.<|im_end|>"
     "<|im_start|>user<|im_sep|>Hi<|im_end|>"
     "<|im_start|>assistant<|im_sep|>Hello.<|im_end|>"
     "<|im_start|>user<|im_sep|>Name a color.<|im_end|>"
     "<|im_start|>assistant<|im_sep|>"},
    // Meta's Llama 2 chat: system inside the first [INST] between <<SYS>>
    // markers, BOS before every user turn, no generation prompt.
    {"llama2", true,
     "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST] Hello. </s>"
     "<s>[INST] Name a color. [/INST]"},
    {"llama3", true,
     "<|begin_of_text|>"
     "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nName a color.<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    // Mistral's cookbook ("Chat templates"): v1 puts the system prompt in the
    // first user message, v3 in the last; tekken drops the spaces.
    {"mistral-v1", true, "<s> [INST] You are terse.\n\nHi [/INST] Hello.</s> [INST] Name a color. [/INST]"},
    {"mistral-v3", true, "<s>[INST] Hi[/INST] Hello.</s>[INST] You are terse.\n\nName a color.[/INST]"},
    {"mistral-v3-tekken", true, "<s>[INST]Hi[/INST]Hello.</s>[INST]You are terse.\n\nName a color.[/INST]"},
    {"mistral-v7", true,
     "<s>[SYSTEM_PROMPT] You are terse.[/SYSTEM_PROMPT][INST] Hi[/INST] Hello.</s>[INST] Name a color.[/INST]"},
    {"mistral-v7-tekken", true,
     "<s>[SYSTEM_PROMPT]You are terse.[/SYSTEM_PROMPT][INST]Hi[/INST]Hello.</s>[INST]Name a color.[/INST]"},
    {"mistral-legacy", true, "<s>[INST] You are terse.\n\nHi [/INST]Hello.</s>[INST] Name a color. [/INST]"},
    {"phi3", false,
     "<|system|>\nYou are terse.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello.<|end|>\n"
     "<|user|>\nName a color.<|end|>\n<|assistant|>\n"},
    {"zephyr", false,
     "<|system|>\nYou are terse.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello.</s>\n"
     "<|user|>\nName a color.</s>\n<|assistant|>\n"},
    // Gemma has no system role: Gemma 3's template opens the first user turn
    // with it.
    {"gemma", true,
     "<bos><start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n"
     "<start_of_turn>model\nHello.<end_of_turn>\n"
     "<start_of_turn>user\nName a color.<end_of_turn>\n"
     "<start_of_turn>model\n"},
    {"deepseek3", true, DS_BOS "You are terse." DS_USER "Hi" DS_ASSISTANT "Hello." DS_EOS DS_USER "Name a color." DS_ASSISTANT},
    {"deepseek", true,
     DS_BOS "You are terse.### Instruction:\nHi\n### Response:\nHello.\n<|EOT|>\n"
            "### Instruction:\nName a color.\n### Response:\n"},
    {"command-r", true,
     "<BOS_TOKEN><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are terse.<|END_OF_TURN_TOKEN|>"
     "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi<|END_OF_TURN_TOKEN|>"
     "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hello.<|END_OF_TURN_TOKEN|>"
     "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Name a color.<|END_OF_TURN_TOKEN|>"
     "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
    {"vicuna", false, "You are terse.\n\nUSER: Hi\nASSISTANT: Hello.</s>\nUSER: Name a color.\nASSISTANT:"},
    {"vicuna-orca", false, "SYSTEM: You are terse.\nUSER: Hi\nASSISTANT: Hello.</s>\nUSER: Name a color.\nASSISTANT:"},
};

class ChatFormatTest : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(ChatFormatTest, SystemUserAssistantUserWithGenerationPrompt) {
  const FamilyCase& c = GetParam();
  const absl::StatusOr<ChatTemplate> chat = ChatTemplate::FromName(c.name);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->name(), c.name);
  EXPECT_EQ(chat->renders_bos(), c.renders_bos);
  const absl::StatusOr<std::string> prompt = chat->Apply(kConversation, true);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_EQ(*prompt, c.expected);
}

// renders_bos() is what the caller relies on to avoid a double BOS: it must
// be true exactly when the prompt starts with a BOS token's text.
TEST_P(ChatFormatTest, RendersBosExactlyWhenThePromptStartsWithIt) {
  const ChatTemplate chat = ChatTemplate::FromName(GetParam().name).value();
  const std::string prompt = chat.Apply(kConversation, true).value();
  bool starts_with_bos = false;
  for (const std::string bos : {"<s>", "<|begin_of_text|>", "<bos>", "<BOS_TOKEN>", DS_BOS}) {
    starts_with_bos |= prompt.rfind(bos, 0) == 0;
  }
  EXPECT_EQ(chat.renders_bos(), starts_with_bos);
}

INSTANTIATE_TEST_SUITE_P(Families, ChatFormatTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<FamilyCase>& info) {
                           std::string name = info.param.name;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

TEST(ChatFormatTest, EveryKnownFamilyHasACase) {
  std::set<std::string> tested;
  for (const FamilyCase& c : kCases) tested.insert(c.name);
  for (const std::string& name : KnownChatTemplateNames()) {
    const absl::StatusOr<ChatTemplate> chat = ChatTemplate::FromName(name);
    ASSERT_TRUE(chat.ok()) << name;
    EXPECT_TRUE(tested.count(std::string(chat->name()))) << "no exact-output case for " << name;
  }
}

TEST(ChatFormatTest, WithoutGenerationPromptTheAssistantTurnIsNotOpened) {
  const ChatTemplate chatml = ChatTemplate::FromName("chatml").value();
  EXPECT_EQ(chatml.Apply(std::vector<ChatMessage>{{"user", "Hi"}}, false).value(), "<|im_start|>user\nHi<|im_end|>\n");
  // Formats whose user turn opens the reply are the same either way.
  const ChatTemplate llama2 = ChatTemplate::FromName("llama2").value();
  EXPECT_EQ(llama2.Apply(std::vector<ChatMessage>{{"user", "Hi"}}, false).value(), "<s>[INST] Hi [/INST]");
  EXPECT_EQ(llama2.Apply(std::vector<ChatMessage>{{"user", "Hi"}}, true).value(), "<s>[INST] Hi [/INST]");
}

TEST(ChatFormatTest, TrimmingFollowsTheTemplate) {
  const std::vector<ChatMessage> padded = {{"user", "  Hi \n"}};
  // Llama 3's template trims content; ChatML's does not.
  EXPECT_EQ(ChatTemplate::FromName("llama3").value().Apply(padded, false).value(),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  EXPECT_EQ(ChatTemplate::FromName("chatml").value().Apply(padded, false).value(),
            "<|im_start|>user\n  Hi \n<|im_end|>\n");
}

TEST(ChatFormatTest, NoSystemMessageNoSystemText) {
  const std::vector<ChatMessage> chat = {{"user", "Hi"}};
  EXPECT_EQ(ChatTemplate::FromName("gemma").value().Apply(chat, true).value(),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(ChatTemplate::FromName("mistral-v3").value().Apply(chat, true).value(), "<s>[INST] Hi[/INST]");
  EXPECT_EQ(ChatTemplate::FromName("llama2").value().Apply(chat, true).value(), "<s>[INST] Hi [/INST]");
}

TEST(ChatFormatTest, EmptyConversationIsBosAndGenerationPrompt) {
  EXPECT_EQ(ChatTemplate::FromName("chatml").value().Apply({}, true).value(), "<|im_start|>assistant\n");
  EXPECT_EQ(ChatTemplate::FromName("llama3").value().Apply({}, false).value(), "<|begin_of_text|>");
}

TEST(ChatFormatTest, UnknownRoleIsRejectedNamingTheMessage) {
  const std::vector<ChatMessage> chat = {{"user", "Hi"}, {"robot", "42"}};
  const absl::StatusOr<std::string> prompt = ChatTemplate::FromName("chatml").value().Apply(chat, true);
  ASSERT_EQ(prompt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(prompt.status().message()).find("message 1"), std::string::npos) << prompt.status();
  EXPECT_NE(std::string(prompt.status().message()).find("\"robot\""), std::string::npos) << prompt.status();
}

TEST(ChatFormatTest, FamiliesThatNeedAlternationRefuseOtherwise) {
  const std::vector<ChatMessage> twice = {{"user", "a"}, {"user", "b"}};
  for (const char* name : {"gemma", "llama2", "mistral-v3"}) {
    const absl::StatusOr<std::string> prompt = ChatTemplate::FromName(name).value().Apply(twice, true);
    ASSERT_EQ(prompt.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(std::string(prompt.status().message()).find("alternate"), std::string::npos) << prompt.status();
  }
  // Families with a role per turn take any order.
  EXPECT_TRUE(ChatTemplate::FromName("chatml").value().Apply(twice, true).ok());
}

TEST(ChatFormatTest, FoldedSystemMessageMustComeFirstAndHaveAUserMessage) {
  const ChatTemplate gemma = ChatTemplate::FromName("gemma").value();
  const std::vector<ChatMessage> late = {{"user", "a"}, {"assistant", "b"}, {"system", "c"}};
  EXPECT_EQ(gemma.Apply(late, true).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<ChatMessage> alone = {{"system", "c"}};
  EXPECT_EQ(gemma.Apply(alone, true).status().code(), absl::StatusCode::kInvalidArgument);
  // With a system role, a system message may come anywhere.
  EXPECT_EQ(ChatTemplate::FromName("chatml").value().Apply(late, false).value(),
            "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n<|im_start|>system\nc<|im_end|>\n");
}

TEST(ChatFormatTest, AliasAndUnknownNames) {
  EXPECT_EQ(ChatTemplate::FromName("mistral").value().name(), "mistral-v3");
  const absl::StatusOr<ChatTemplate> unknown = ChatTemplate::FromName("alpaca");
  ASSERT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(unknown.status().message());
  EXPECT_NE(message.find("alpaca"), std::string::npos) << message;
  for (const std::string& name : KnownChatTemplateNames()) {
    EXPECT_NE(message.find(name), std::string::npos) << "message does not list " << name << ": " << message;
  }
}

}  // namespace
}  // namespace octo
