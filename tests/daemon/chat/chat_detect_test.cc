// Detection from the Jinja templates models ship (tokenizer.chat_template).
// The snippets below are the published templates of the models named, or
// their message loops where the full template is long (tools handling cut).
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "daemon/chat/chat_template.h"
#include "gtest/gtest.h"
#include "storage/gguf.h"
#include "tests/shared_data.h"

namespace octo {
namespace {

struct DetectCase {
  std::string model;
  std::string jinja;
  std::string family;
};

void PrintTo(const DetectCase& c, std::ostream* os) { *os << c.model; }

const DetectCase kCases[] = {
    {"Qwen2.5-7B-Instruct", R"JINJA({%- if tools %}
    {{- '<|im_start|>system\n' }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %})JINJA",
     "chatml"},
    {"phi-4", R"JINJA({% for message in messages %}{% if (message['role'] == 'system') %}{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif (message['role'] == 'user') %}{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif (message['role'] == 'assistant') %}{{'<|im_start|>assistant<|im_sep|>' + message['content'] + '<|im_end|>'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %})JINJA",
     "phi4"},
    {"Llama-2-7b-chat-hf", R"JINJA({% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %})JINJA",
     "llama2"},
    {"Meta-Llama-3-8B-Instruct", R"JINJA({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>

'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>

' }}{% endif %})JINJA",
     "llama3"},
    {"Llama-3.1-8B-Instruct", R"JINJA({{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %})JINJA",
     "llama3"},
    {"Mistral-7B-Instruct-v0.1 (Mistral's v1 template)", R"JINJA({%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %})JINJA",
     "mistral-v1"},
    {"Mistral-7B-Instruct-v0.3", R"JINJA({%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {{- "[/AVAILABLE_TOOLS]" }}
        {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- endif %}
{%- endfor %})JINJA",
     "mistral-v3"},
    {"Mistral-Nemo-Instruct-2407", R"JINJA({%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS][" }}
            {{- "[/AVAILABLE_TOOLS]" }}
        {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST]" + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST]" + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message["role"] == "assistant" %}
        {{- message["content"] + eos_token}}
    {%- endif %}
{%- endfor %})JINJA",
     "mistral-v3-tekken"},
    {"Mistral-Large-Instruct-2411", R"JINJA({{- bos_token }}
{%- for message in messages %}
    {%- if message['role'] == 'user' %}
        {{- '[INST] ' + message['content'] + '[/INST]' }}
    {%- elif message['role'] == 'system' %}
        {{- '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token }}
    {%- endif %}
{%- endfor %})JINJA",
     "mistral-v7"},
    {"Mistral-Small-24B-Instruct-2501", R"JINJA({%- set today = strftime_now("%Y-%m-%d") %}
{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system_message = default_system_message %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}
{%- for message in loop_messages %}
    {%- if message['role'] == 'user' %}
        {{- '[INST]' + message['content'] + '[/INST]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- message['content'] + eos_token }}
    {%- endif %}
{%- endfor %})JINJA",
     "mistral-v7-tekken"},
    {"Mistral-7B-Instruct-v0.2 (as first published)", R"JINJA({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})JINJA",
     "mistral-legacy"},
    {"Phi-3-mini-4k-instruct", R"JINJA({% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'user' %}{{'<|user|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>
' + message['content'] + '<|end|>
'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>
' }}{% else %}{{ eos_token }}{% endif %})JINJA",
     "phi3"},
    {"zephyr-7b-beta", R"JINJA({% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>
'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %})JINJA",
     "zephyr"},
    {"gemma-2-9b-it", R"JINJA({{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '
' + message['content'] | trim + '<end_of_turn>
' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model
'}}{% endif %})JINJA",
     "gemma"},
    {"DeepSeek-R1-Distill-Qwen-7B",
     "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
     "{{ bos_token }}{{ ns.system_prompt }}{%- for message in messages %}{%- if message['role'] == 'user' %}"
     "{{'<\uFF5CUser\uFF5C>' + message['content']}}{%- endif %}{%- if message['role'] == 'assistant' %}"
     "{{'<\uFF5CAssistant\uFF5C>' + content + '<\uFF5Cend\u2581of\u2581sentence\uFF5C>'}}{%- endif %}{%- endfor -%}"
     "{% if add_generation_prompt %}{{'<\uFF5CAssistant\uFF5C><think>\\n'}}{% endif %}",
     "deepseek3"},
    {"deepseek-coder-6.7b-instruct", R"JINJA({%- set ns = namespace(found=false) -%}
{{bos_token}}{%- if not ns.found -%}
{{'You are an AI programming assistant, utilizing the Deepseek Coder model, developed by Deepseek Company, and you only answer questions related to computer science.\n'}}
{%- endif %}
{%- for message in messages %}
    {%- if message['role'] == 'system' %}
{{ message['content'] }}
    {%- else %}
        {%- if message['role'] == 'user' %}
{{'### Instruction:\n' + message['content'] + '\n'}}
        {%- else %}
{{'### Response:\n' + message['content'] + '\n<|EOT|>\n'}}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{% if add_generation_prompt %}
{{'### Response:'}}
{% endif %})JINJA",
     "deepseek"},
    {"c4ai-command-r-v01", R"JINJA({{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% if system_message != false %}{{ '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>' + system_message + '<|END_OF_TURN_TOKEN|>' }}{% endif %}{% for message in loop_messages %}{% set content = message['content'] %}{% if message['role'] == 'user' %}{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content.strip() + '<|END_OF_TURN_TOKEN|>' }}{% elif message['role'] == 'assistant' %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>'  + content.strip() + '<|END_OF_TURN_TOKEN|>' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{% endif %})JINJA",
     "command-r"},
    {"vicuna-13b-v1.5 (a GGUF's template)", R"JINJA({% for message in messages %}{% if message['role'] == 'system' %}{{message['content'] + '

'}}{% elif message['role'] == 'user' %}{{'USER: ' + message['content'] + '
'}}{% elif message['role'] == 'assistant' %}{{'ASSISTANT: ' + message['content'] + '</s>
'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %})JINJA",
     "vicuna"},
    {"Orca-Vicuna (a GGUF's template)", R"JINJA({% for message in messages %}{% if message['role'] == 'system' %}{{'SYSTEM: ' + message['content'] + '
'}}{% elif message['role'] == 'user' %}{{'USER: ' + message['content'] + '
'}}{% elif message['role'] == 'assistant' %}{{'ASSISTANT: ' + message['content'] + '</s>
'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %})JINJA",
     "vicuna-orca"},
};

class ChatDetectTest : public ::testing::TestWithParam<DetectCase> {};

TEST_P(ChatDetectTest, RecognisesTheFamily) {
  const absl::StatusOr<ChatTemplate> chat = ChatTemplate::Detect(GetParam().jinja);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->name(), GetParam().family);
}

INSTANTIATE_TEST_SUITE_P(Models, ChatDetectTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<DetectCase>& info) {
                           std::string name = info.param.family;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return absl::StrCat(name, "_", info.index);
                         });

TEST(ChatDetectErrorsTest, EmptyTemplateSaysTheModelHasNoneAndListsNames) {
  for (const char* empty : {"", "  \n\t"}) {
    const absl::StatusOr<ChatTemplate> chat = ChatTemplate::Detect(empty);
    ASSERT_EQ(chat.status().code(), absl::StatusCode::kNotFound);
    const std::string message(chat.status().message());
    EXPECT_NE(message.find("no chat template"), std::string::npos) << message;
    EXPECT_NE(message.find("chatml"), std::string::npos) << message;
    EXPECT_NE(message.find("llama3"), std::string::npos) << message;
  }
}

TEST(ChatDetectErrorsTest, UnrecognisedTemplateShowsItsStartAndListsNames) {
  // Alpaca-style: no family's markers.
  const std::string alpaca =
      "{% for message in messages %}{% if message['role'] == 'user' %}{{ '### Instruction:\n' + message['content'] + "
      "'\n\n' }}{% else %}{{ '### Response:\n' + message['content'] + eos_token + '\n\n' }}{% endif %}{% endfor %}";
  const absl::StatusOr<ChatTemplate> chat = ChatTemplate::Detect(alpaca);
  ASSERT_EQ(chat.status().code(), absl::StatusCode::kNotFound);
  const std::string message(chat.status().message());
  EXPECT_NE(message.find("not one we recognise"), std::string::npos) << message;
  EXPECT_NE(message.find("{% for message in messages %}{% if message['role'] == 'user' %}"), std::string::npos)
      << message;
  EXPECT_EQ(message.find("eos_token"), std::string::npos) << "the excerpt should stop near 80 bytes: " << message;
  EXPECT_NE(message.find("..."), std::string::npos) << message;
  for (const std::string& name : KnownChatTemplateNames()) {
    EXPECT_NE(message.find(name), std::string::npos) << "message does not list " << name;
  }
}

TEST(ChatDetectErrorsTest, ExcerptEscapesNewlinesAndKeepsCharactersWhole) {
  // 79 ASCII bytes then a 3-byte character straddling the 80-byte cut.
  const std::string text = "\n" + std::string(78, 'x') + "\xe2\x86\x92 more";
  const std::string message(ChatTemplate::Detect(text).status().message());
  EXPECT_NE(message.find("\\n"), std::string::npos) << message;
  EXPECT_EQ(message.find("\xe2\x86"), std::string::npos) << "a split character leaked: " << message;
}

// A model without a template we recognise chats in chatml, as llama.cpp
// does, and says why once (the notice octod logs).
TEST(ChatForModelTest, AModelWithoutATemplateChatsInChatml) {
  for (const char* empty : {"", " \n"}) {
    const ModelChatTemplate chat = ChatTemplate::ForModel(empty);
    EXPECT_EQ(chat.chat_template.name(), "chatml");
    EXPECT_EQ(chat.chat_template.name(), kFallbackChatTemplate);
    const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi"}};
    EXPECT_EQ(chat.chat_template.Apply(messages, /*add_generation_prompt=*/true).value(),
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_NE(chat.fallback_notice.find("no chat template"), std::string::npos) << chat.fallback_notice;
    EXPECT_NE(chat.fallback_notice.find("chats in chatml"), std::string::npos) << chat.fallback_notice;
    EXPECT_NE(chat.fallback_notice.find("llama3"), std::string::npos) << "lists the names: " << chat.fallback_notice;
    EXPECT_EQ(chat.fallback_notice.find('\n'), std::string::npos) << "one log line: " << chat.fallback_notice;
  }
}

TEST(ChatForModelTest, AnUnrecognisedTemplateChatsInChatmlAndShowsItsStart) {
  const std::string alpaca =
      "{% for message in messages %}\n{{ '### Instruction:\n' + message['content'] }}{% endfor %}";
  const ModelChatTemplate chat = ChatTemplate::ForModel(alpaca);
  EXPECT_EQ(chat.chat_template.name(), "chatml");
  EXPECT_NE(chat.fallback_notice.find("not one we recognise"), std::string::npos) << chat.fallback_notice;
  EXPECT_NE(chat.fallback_notice.find("{% for message in messages %}\\n"), std::string::npos) << chat.fallback_notice;
  EXPECT_EQ(chat.fallback_notice.find('\n'), std::string::npos) << "one log line: " << chat.fallback_notice;
}

TEST(ChatForModelTest, ARecognisedTemplateIsTheModelsOwnWithoutANotice) {
  for (const DetectCase& c : kCases) {
    const ModelChatTemplate chat = ChatTemplate::ForModel(c.jinja);
    EXPECT_EQ(chat.chat_template.name(), c.family) << c.model;
    EXPECT_EQ(chat.fallback_notice, "") << c.model;
  }
}

// Ollama's Go templates carry the special tokens a GGUF's Jinja does, so
// Detect names their family too (the `template` field of /api/chat).
TEST(ChatDetectGoTemplateTest, OllamasGoTemplatesAreRecognised) {
  const std::pair<std::string, std::string> cases[] = {
      {"{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n",
       "chatml"},
      {"{{ if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>{{ end }}"
       "{{ if .Prompt }}<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|>{{ end }}"
       "<|start_header_id|>assistant<|end_header_id|>\n\n{{ .Response }}<|eot_id|>",
       "llama3"},
      {"{{ if .System }}<start_of_turn>user\n{{ .System }} {{ end }}{{ .Prompt }}<end_of_turn>\n<start_of_turn>model\n"
       "{{ .Response }}<end_of_turn>\n",
       "gemma"},
  };
  for (const auto& [go_template, family] : cases) {
    const absl::StatusOr<ChatTemplate> chat = ChatTemplate::Detect(go_template);
    ASSERT_TRUE(chat.ok()) << family << ": " << chat.status();
    EXPECT_EQ(chat->name(), family);
  }
}

// The shared test models: a model without tokenizer.chat_template gets the
// "has none" error; one with a template must be recognised and render.
TEST(ChatDetectSharedModelsTest, TemplatesOfTheTestModels) {
  OCTO_REQUIRE_SHARED("models");
  int checked = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(::octo::testing::SharedPath("models"))) {
    if (entry.path().extension() != ".gguf") continue;
    const absl::StatusOr<GgufFile> gguf = GgufFile::Open(entry.path().string());
    if (!gguf.ok()) continue;  // e.g. the GGUF v1 file the reader refuses; not ours to test
    ++checked;
    const GgufValue* value = gguf->Find("tokenizer.chat_template");
    if (value == nullptr) {
      const absl::StatusOr<ChatTemplate> chat = ChatTemplate::Detect("");
      EXPECT_EQ(chat.status().code(), absl::StatusCode::kNotFound) << entry.path();
      continue;
    }
    const absl::StatusOr<absl::string_view> jinja = value->AsString();
    ASSERT_TRUE(jinja.ok()) << entry.path() << ": " << jinja.status();
    const absl::StatusOr<ChatTemplate> chat = ChatTemplate::Detect(*jinja);
    ASSERT_TRUE(chat.ok()) << entry.path() << ": " << chat.status();
    EXPECT_TRUE(chat->Apply(std::vector<ChatMessage>{{"user", "Hi"}}, true).ok()) << entry.path();
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace octo
