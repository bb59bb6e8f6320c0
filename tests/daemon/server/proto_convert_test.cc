#include "daemon/server/proto_convert.h"

#include "gtest/gtest.h"

namespace octo {
namespace {

// A top-logprob alternative can be a lone byte of a character (a byte
// token); protobuf refuses to send a string that is not UTF-8, which left
// the client waiting. It goes as U+FFFD.
TEST(ProtoConvertTest, AlternativesThatAreNotUtf8AreSentAsReplacementCharacters) {
  GeneratedToken token;
  token.id = 7;
  token.text = "ok";
  token.top = {TokenLogprob{.id = 136, .logprob = -0.5, .text = "\xE2"},
               TokenLogprob{.id = 8, .logprob = -1.5, .text = "caf\xC3\xA9"}};
  v1::GeneratedToken proto;
  ToProto(token, /*with_logprobs=*/true, &proto);
  ASSERT_EQ(proto.top_size(), 2);
  EXPECT_EQ(proto.top(0).text(), "\xEF\xBF\xBD");
  EXPECT_EQ(proto.top(1).text(), "caf\xC3\xA9");
  std::string wire;
  EXPECT_TRUE(proto.SerializeToString(&wire));
  v1::GeneratedToken back;
  EXPECT_TRUE(back.ParseFromString(wire));
  EXPECT_EQ(back.top(0).id(), 136);
}

TEST(ProtoConvertTest, UnsetSamplingFieldsTakeOctoDefaults) {
  const SamplingParams params = SamplingFromProto(v1::SamplingParams());
  const SamplingParams defaults;
  EXPECT_EQ(params.temperature, defaults.temperature);
  EXPECT_EQ(params.top_k, defaults.top_k);
  EXPECT_EQ(params.top_p, defaults.top_p);
  EXPECT_EQ(params.min_p, defaults.min_p);
  EXPECT_EQ(params.repeat_last_n, defaults.repeat_last_n);
  EXPECT_EQ(params.repeat_penalty, defaults.repeat_penalty);
  EXPECT_EQ(params.frequency_penalty, defaults.frequency_penalty);
  EXPECT_EQ(params.presence_penalty, defaults.presence_penalty);
  EXPECT_FALSE(params.seed.has_value());
  EXPECT_EQ(params.max_tokens, defaults.max_tokens);
  EXPECT_TRUE(params.stop.empty());
  EXPECT_EQ(params.top_logprobs, 0);
}

// A set field wins even when it is the proto's zero (temperature 0 = greedy,
// top_k 0 = off, seed 0): the presence bit decides, not the value.
TEST(ProtoConvertTest, SetFieldsAreCopiedIncludingZeros) {
  v1::SamplingParams proto;
  proto.set_temperature(0);
  proto.set_top_k(0);
  proto.set_top_p(0.5);
  proto.set_min_p(0);
  proto.set_repeat_last_n(0);
  proto.set_repeat_penalty(1.1);
  proto.set_frequency_penalty(-0.5);
  proto.set_presence_penalty(0.25);
  proto.set_seed(0);
  proto.set_max_tokens(0);
  proto.add_stop("\n\n");
  proto.set_top_logprobs(3);
  const SamplingParams params = SamplingFromProto(proto);
  EXPECT_EQ(params.temperature, 0);
  EXPECT_EQ(params.top_k, 0);
  EXPECT_EQ(params.top_p, 0.5);
  EXPECT_EQ(params.min_p, 0);
  EXPECT_EQ(params.repeat_last_n, 0);
  EXPECT_EQ(params.repeat_penalty, 1.1);
  EXPECT_EQ(params.frequency_penalty, -0.5);
  EXPECT_EQ(params.presence_penalty, 0.25);
  EXPECT_EQ(params.seed, std::optional<uint64_t>(0));
  EXPECT_EQ(params.max_tokens, 0);
  EXPECT_EQ(params.stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(params.top_logprobs, 3);
}

// Ranges are the core's to check: the skin passes bad values through so
// ValidateSamplingParams names them.
TEST(ProtoConvertTest, OutOfRangeValuesPassThroughForTheCoreToReject) {
  v1::GenerateRequest request;
  request.set_prompt("hi");
  request.mutable_sampling()->set_temperature(-1);
  request.mutable_sampling()->set_top_logprobs(500);
  absl::StatusOr<GenerateJob> job = JobFromProto(request);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->sampling.temperature, -1);
  EXPECT_EQ(job->sampling.top_logprobs, 500);
  const absl::Status valid = ValidateSamplingParams(job->sampling);
  EXPECT_EQ(valid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(valid.message().find("temperature"), absl::string_view::npos) << valid;
}

TEST(ProtoConvertTest, GenerateRequestFields) {
  v1::GenerateRequest request;
  request.set_session_id("s1");
  request.add_prompt_tokens(5);
  request.add_prompt_tokens(6);
  request.set_parse_special(true);
  absl::StatusOr<GenerateJob> job = JobFromProto(request);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->session_id, "s1");
  EXPECT_EQ(job->prompt_tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_TRUE(job->add_bos) << "unset add_bos defaults to true";
  EXPECT_TRUE(job->parse_special);
  EXPECT_FALSE(job->chat);
  request.set_add_bos(false);
  EXPECT_FALSE(JobFromProto(request)->add_bos);
}

TEST(ProtoConvertTest, ChatRequestFields) {
  v1::ChatRequest request;
  request.set_chat_template("chatml");
  v1::ChatMessage* system = request.add_messages();
  system->set_role("system");
  system->set_content("Be brief.");
  v1::ChatMessage* user = request.add_messages();
  user->set_role("user");
  user->set_content("Hi");
  absl::StatusOr<GenerateJob> job = JobFromProto(request);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->chat);
  EXPECT_EQ(job->chat_template, "chatml");
  ASSERT_EQ(job->messages.size(), 2u);
  EXPECT_EQ(job->messages[0].role, "system");
  EXPECT_EQ(job->messages[1].content, "Hi");
}

void ExpectRefused(const absl::StatusOr<GenerateJob>& job, absl::string_view field) {
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(job.status().message().find(field), absl::string_view::npos) << job.status();
}

TEST(ProtoConvertTest, OversizeFieldsAreRefusedNamingTheLimit) {
  v1::ChatRequest chat;
  for (size_t i = 0; i <= kMaxChatMessages; ++i) chat.add_messages()->set_role("user");
  ExpectRefused(JobFromProto(chat), "messages has 257 entries; at most 256");

  chat.Clear();
  chat.add_messages()->set_content(std::string(kMaxPromptBytes + 1, 'x'));
  ExpectRefused(JobFromProto(chat), "messages[0].content");

  v1::GenerateRequest generate;
  generate.set_prompt(std::string(kMaxPromptBytes + 1, 'x'));
  ExpectRefused(JobFromProto(generate), "prompt has 1048577 bytes");

  generate.Clear();
  generate.set_session_id(std::string(kMaxSessionIdBytes + 1, 's'));
  ExpectRefused(JobFromProto(generate), "session_id");

  generate.Clear();
  for (size_t i = 0; i <= kMaxStopStrings; ++i) generate.mutable_sampling()->add_stop("x");
  ExpectRefused(JobFromProto(generate), "sampling.stop has 17 strings");
}

TEST(ProtoConvertTest, ExactLimitsAreAccepted) {
  v1::ChatRequest chat;
  for (size_t i = 0; i < kMaxChatMessages; ++i) chat.add_messages()->set_role("user");
  EXPECT_TRUE(JobFromProto(chat).ok());
  v1::GenerateRequest generate;
  generate.set_prompt(std::string(kMaxPromptBytes, 'x'));
  generate.set_session_id(std::string(kMaxSessionIdBytes, 's'));
  EXPECT_TRUE(JobFromProto(generate).ok());
}

TEST(ProtoConvertTest, ResidencyChangeKeepsUnsetFields) {
  v1::SetResidencyRequest request;
  request.set_pin_last(0);
  request.set_auto_budget(true);
  const ResidencyChange change = ResidencyChangeFromProto(request);
  EXPECT_FALSE(change.pin_first.has_value());
  EXPECT_EQ(change.pin_last, std::optional<uint32_t>(0));
  EXPECT_FALSE(change.budget_bytes.has_value());
  EXPECT_EQ(change.auto_budget, std::optional<bool>(true));
  EXPECT_FALSE(change.vram_budget_bytes.has_value());
  EXPECT_FALSE(change.vram_auto.has_value());
  EXPECT_FALSE(change.expert_cache_bytes.has_value());
}

// expert_cache_auto asks for kAutoExpertCache and wins over a byte count;
// 0 bytes is a cache of nothing, not "unset".
TEST(ProtoConvertTest, ResidencyChangeCopiesTheExpertCache) {
  v1::SetResidencyRequest request;
  request.set_expert_cache_bytes(8ull << 30);
  request.set_expert_cache_auto(false);
  EXPECT_EQ(ResidencyChangeFromProto(request).expert_cache_bytes, std::optional<uint64_t>(8ull << 30));

  request.set_expert_cache_auto(true);
  EXPECT_EQ(ResidencyChangeFromProto(request).expert_cache_bytes, std::optional<uint64_t>(kAutoExpertCache));

  request.Clear();
  request.set_expert_cache_auto(true);
  const ResidencyChange change = ResidencyChangeFromProto(request);
  EXPECT_EQ(change.expert_cache_bytes, std::optional<uint64_t>(kAutoExpertCache));
  EXPECT_FALSE(change.budget_bytes.has_value()) << "the layer budget is left alone";
  EXPECT_FALSE(change.auto_budget.has_value());

  request.Clear();
  request.set_expert_cache_bytes(0);
  EXPECT_EQ(ResidencyChangeFromProto(request).expert_cache_bytes, std::optional<uint64_t>(0));

  request.Clear();
  request.set_expert_cache_auto(false);
  EXPECT_FALSE(ResidencyChangeFromProto(request).expert_cache_bytes.has_value()) << "no size given: keep";
}

// As for the host budget, the presence bit decides: a VRAM budget of 0 is
// passed on for the core to refuse, not taken for "unset".
TEST(ProtoConvertTest, ResidencyChangeCopiesTheVramBudget) {
  v1::SetResidencyRequest request;
  request.set_vram_budget_bytes(40ull << 30);
  request.set_vram_auto(false);
  ResidencyChange change = ResidencyChangeFromProto(request);
  EXPECT_EQ(change.vram_budget_bytes, std::optional<uint64_t>(40ull << 30));
  EXPECT_EQ(change.vram_auto, std::optional<bool>(false));
  EXPECT_FALSE(change.budget_bytes.has_value()) << "the host budget is a different field";
  EXPECT_FALSE(change.auto_budget.has_value());

  request.Clear();
  request.set_vram_auto(true);
  change = ResidencyChangeFromProto(request);
  EXPECT_FALSE(change.vram_budget_bytes.has_value());
  EXPECT_EQ(change.vram_auto, std::optional<bool>(true));

  request.Clear();
  request.set_vram_budget_bytes(0);
  EXPECT_EQ(ResidencyChangeFromProto(request).vram_budget_bytes, std::optional<uint64_t>(0));
}

TEST(ProtoConvertTest, TokenLogprobsOnlyWhenAskedFor) {
  GeneratedToken token;
  token.id = 42;
  token.text = " cat";
  token.logprob = -0.5;
  token.top = {{42, -0.5, "x"}, {7, -1.5, "y"}};
  v1::GeneratedToken plain;
  ToProto(token, /*with_logprobs=*/false, &plain);
  EXPECT_EQ(plain.id(), 42);
  EXPECT_EQ(plain.text(), " cat");
  EXPECT_EQ(plain.logprob(), 0);
  EXPECT_EQ(plain.top_size(), 0);
  v1::GeneratedToken with;
  ToProto(token, /*with_logprobs=*/true, &with);
  EXPECT_EQ(with.logprob(), -0.5);
  ASSERT_EQ(with.top_size(), 2);
  EXPECT_EQ(with.top(1).id(), 7);
  EXPECT_EQ(with.top(1).logprob(), -1.5);
  EXPECT_EQ(with.top(1).text(), "y");
}

TEST(ProtoConvertTest, StatsRateIsGeneratedOverDecodeTime) {
  JobStats stats;
  stats.generated_tokens = 30;
  stats.decode_seconds = 1.5;
  stats.load_wait_seconds = 0.25;
  stats.seed = 1234567890123ull;
  v1::GenerateStats proto;
  ToProto(stats, &proto);
  EXPECT_DOUBLE_EQ(proto.tokens_per_second(), 20);
  EXPECT_EQ(proto.load_wait_seconds(), 0.25);
  EXPECT_EQ(proto.seed(), 1234567890123ull);
  ToProto(JobStats(), &proto);
  EXPECT_EQ(proto.tokens_per_second(), 0) << "no decode time: no rate, not a division by zero";
}

TEST(ProtoConvertTest, ReportNumbersLayersAndLeavesModelUnsetWhenNone) {
  RuntimeReport report;
  report.layers.resize(3);
  report.layers[2].resident = true;
  report.layers[2].compute_seconds = 0.004;
  report.sessions.emplace_back();
  report.sessions.back().id = "s1";
  report.loader.io_mode = "threads+direct";
  report.overlap = 0.75;
  v1::GetStatusResponse proto;
  ToProto(report, &proto);
  EXPECT_FALSE(proto.has_model());
  ASSERT_EQ(proto.layers_size(), 3);
  EXPECT_EQ(proto.layers(2).layer(), 2u);
  EXPECT_TRUE(proto.layers(2).resident());
  EXPECT_EQ(proto.layers(2).compute_seconds(), 0.004);
  EXPECT_EQ(proto.sessions(0).session_id(), "s1");
  EXPECT_EQ(proto.loader().io_mode(), "threads+direct");
  EXPECT_EQ(proto.overlap(), 0.75);

  report.model.emplace();
  report.model->path = "tiny";
  report.model->n_layers = 3;
  proto.Clear();
  ToProto(report, &proto);
  ASSERT_TRUE(proto.has_model());
  EXPECT_EQ(proto.model().path(), "tiny");
  EXPECT_EQ(proto.model().n_layers(), 3u);
}

TEST(ProtoConvertTest, LayerTiersAndCopyTimes) {
  RuntimeReport report;
  report.layers.resize(3);
  report.layers[0].tier = LayerTier::kDevice;
  report.layers[0].resident = true;
  report.layers[1].tier = LayerTier::kHost;
  report.layers[1].resident = true;
  report.layers[1].copies = 12;
  report.layers[1].copy_seconds = 0.002;
  report.layers[1].copy_wait_seconds = 0.0005;
  report.layers[2].tier = LayerTier::kDisk;
  v1::GetStatusResponse proto;
  ToProto(report, &proto);
  ASSERT_EQ(proto.layers_size(), 3);
  EXPECT_EQ(proto.layers(0).tier(), "vram");
  EXPECT_EQ(proto.layers(1).tier(), "host");
  EXPECT_EQ(proto.layers(2).tier(), "disk");
  EXPECT_EQ(proto.layers(1).copies(), 12u);
  EXPECT_EQ(proto.layers(1).copy_seconds(), 0.002);
  EXPECT_EQ(proto.layers(1).copy_wait_seconds(), 0.0005);
  EXPECT_EQ(proto.layers(0).copies(), 0u);
}

TEST(ProtoConvertTest, DeviceOnlyWhenPresent) {
  ResidencyReport residency;
  v1::ResidencyStatus proto;
  ToProto(residency, &proto);
  EXPECT_FALSE(proto.has_device()) << "CPU backend: no device message";

  DeviceReport& device = residency.device;
  device.present = true;
  device.name = "NVIDIA H100 80GB HBM3";
  device.index = 1;
  device.total_bytes = 80ull << 30;
  device.free_bytes = 10ull << 30;
  device.auto_budget = false;
  device.budget_bytes = 60ull << 30;
  device.held_bytes = 58ull << 30;
  device.peak_bytes = 59ull << 30;
  device.device_layers = 70;
  device.staging_buffers = 3;
  device.staging_bytes = 800ull << 20;
  device.global_bytes = 1ull << 30;
  device.workspace_bytes = 256ull << 20;
  device.kv_bytes = 2ull << 30;
  device.copied_bytes = 100ull << 30;
  device.copy_seconds = 2.0;
  device.h2d_gbps = 53.7;
  device.overlap = 0.9;
  proto.Clear();
  ToProto(residency, &proto);
  ASSERT_TRUE(proto.has_device());
  const v1::DeviceStatus& status = proto.device();
  EXPECT_TRUE(status.present());
  EXPECT_EQ(status.name(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(status.index(), 1);
  EXPECT_EQ(status.total_bytes(), 80ull << 30);
  EXPECT_EQ(status.free_bytes(), 10ull << 30);
  EXPECT_FALSE(status.auto_budget());
  EXPECT_EQ(status.budget_bytes(), 60ull << 30);
  EXPECT_EQ(status.held_bytes(), 58ull << 30);
  EXPECT_EQ(status.peak_bytes(), 59ull << 30);
  EXPECT_EQ(status.device_layers(), 70u);
  EXPECT_EQ(status.staging_buffers(), 3u);
  EXPECT_EQ(status.staging_bytes(), 800ull << 20);
  EXPECT_EQ(status.global_bytes(), 1ull << 30);
  EXPECT_EQ(status.workspace_bytes(), 256ull << 20);
  EXPECT_EQ(status.kv_bytes(), 2ull << 30);
  EXPECT_EQ(status.copied_bytes(), 100ull << 30);
  EXPECT_EQ(status.copy_seconds(), 2.0);
  EXPECT_EQ(status.h2d_gbps(), 53.7);
  EXPECT_EQ(status.overlap(), 0.9);

  // And through the whole report.
  RuntimeReport report;
  report.residency = residency;
  v1::GetStatusResponse full;
  ToProto(report, &full);
  EXPECT_EQ(full.residency().device().device_layers(), 70u);
}

TEST(ProtoConvertTest, ExpertsOnlyForMoeModels) {
  ResidencyReport residency;
  v1::ResidencyStatus proto;
  ToProto(residency, &proto);
  EXPECT_FALSE(proto.has_experts()) << "dense model: no experts message";

  residency.experts.not_selective = "decomposed with format 1";
  ToProto(residency, &proto);
  ASSERT_TRUE(proto.has_experts());
  EXPECT_FALSE(proto.experts().present());
  EXPECT_EQ(proto.experts().not_selective(), "decomposed with format 1");

  ExpertReport& experts = residency.experts;
  experts.present = true;
  experts.not_selective.clear();
  experts.two_phase_layers = 46;
  experts.cache_capacity_bytes = 8ull << 30;
  experts.cache_held_bytes = 7ull << 30;
  experts.cache_entries = 812;
  experts.cache_hits = 9000;
  experts.cache_misses = 1000;
  experts.cache_evictions = 120;
  experts.routed_from_disk = 1000;
  experts.predicted = 750;
  experts.whole_layer_reads = 3;
  experts.dense_bytes_read = 5ull << 30;
  experts.expert_bytes_read = 20ull << 30;
  proto.Clear();
  ToProto(residency, &proto);
  ASSERT_TRUE(proto.has_experts());
  const v1::ExpertStatus& status = proto.experts();
  EXPECT_TRUE(status.present());
  EXPECT_EQ(status.not_selective(), "");
  EXPECT_EQ(status.two_phase_layers(), 46u);
  EXPECT_EQ(status.cache_capacity_bytes(), 8ull << 30);
  EXPECT_EQ(status.cache_held_bytes(), 7ull << 30);
  EXPECT_EQ(status.cache_entries(), 812u);
  EXPECT_EQ(status.cache_hits(), 9000u);
  EXPECT_EQ(status.cache_misses(), 1000u);
  EXPECT_EQ(status.cache_evictions(), 120u);
  EXPECT_EQ(status.routed_from_disk(), 1000u);
  EXPECT_EQ(status.predicted(), 750u);
  EXPECT_EQ(status.whole_layer_reads(), 3u);
  EXPECT_EQ(status.dense_bytes_read(), 5ull << 30);
  EXPECT_EQ(status.expert_bytes_read(), 20ull << 30);

  // And through the whole report.
  RuntimeReport report;
  report.residency = residency;
  v1::GetStatusResponse full;
  ToProto(report, &full);
  EXPECT_EQ(full.residency().experts().cache_entries(), 812u);
}

}  // namespace
}  // namespace octo
