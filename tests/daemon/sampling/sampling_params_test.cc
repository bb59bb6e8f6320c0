#include "daemon/sampling/sampling_params.h"

#include <cmath>
#include <functional>
#include <string>

#include "gtest/gtest.h"

namespace octo {
namespace {

// Applies `change` to default params and returns the validation status.
absl::Status ValidateWith(const std::function<void(SamplingParams&)>& change) {
  SamplingParams params;
  change(params);
  return ValidateSamplingParams(params);
}

// The status is INVALID_ARGUMENT and its message names `field`.
void ExpectRejected(const absl::Status& status, const std::string& field) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(std::string(status.message()).find(field), std::string::npos) << status;
}

TEST(SamplingParamsTest, DefaultsAreLlamaCppServerDefaultsAndValid) {
  SamplingParams params;
  EXPECT_DOUBLE_EQ(params.temperature, 0.8);
  EXPECT_EQ(params.top_k, 40);
  EXPECT_DOUBLE_EQ(params.top_p, 0.95);
  EXPECT_DOUBLE_EQ(params.min_p, 0.05);
  EXPECT_EQ(params.repeat_last_n, 64);
  EXPECT_DOUBLE_EQ(params.repeat_penalty, 1.0);
  EXPECT_DOUBLE_EQ(params.frequency_penalty, 0.0);
  EXPECT_DOUBLE_EQ(params.presence_penalty, 0.0);
  EXPECT_FALSE(params.seed.has_value());
  EXPECT_EQ(params.max_tokens, -1);
  EXPECT_TRUE(ValidateSamplingParams(params).ok());
}

TEST(SamplingParamsTest, BoundaryValuesAreAccepted) {
  EXPECT_TRUE(ValidateWith([](SamplingParams& p) { p.temperature = 0; }).ok());
  EXPECT_TRUE(ValidateWith([](SamplingParams& p) { p.top_k = 0; }).ok());
  EXPECT_TRUE(ValidateWith([](SamplingParams& p) { p.top_p = 1; }).ok());
  EXPECT_TRUE(ValidateWith([](SamplingParams& p) { p.min_p = 0; }).ok());
  EXPECT_TRUE(ValidateWith([](SamplingParams& p) { p.min_p = 1; }).ok());
  EXPECT_TRUE(ValidateWith([](SamplingParams& p) { p.repeat_last_n = -1; }).ok());
  EXPECT_TRUE(ValidateWith([](SamplingParams& p) { p.repeat_last_n = 0; }).ok());
  EXPECT_TRUE(ValidateWith([](SamplingParams& p) { p.frequency_penalty = -kMaxAbsTokenPenalty; }).ok());
  EXPECT_TRUE(ValidateWith([](SamplingParams& p) { p.presence_penalty = kMaxAbsTokenPenalty; }).ok());
  EXPECT_TRUE(ValidateWith([](SamplingParams& p) { p.max_tokens = 0; }).ok());
  EXPECT_TRUE(ValidateWith([](SamplingParams& p) { p.top_logprobs = kMaxTopLogprobs; }).ok());
  EXPECT_TRUE(ValidateWith([](SamplingParams& p) {
                p.stop.assign(kMaxStopStrings, std::string(kMaxStopStringBytes, 'x'));
              }).ok());
}

TEST(SamplingParamsTest, EachBadFieldIsNamed) {
  const double nan = std::nan("");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.temperature = -0.1; }), "temperature");
  ExpectRejected(ValidateWith([&](SamplingParams& p) { p.temperature = nan; }), "temperature");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.temperature = INFINITY; }), "temperature");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.top_k = -1; }), "top_k");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.top_p = 0; }), "top_p");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.top_p = 1.01; }), "top_p");
  ExpectRejected(ValidateWith([&](SamplingParams& p) { p.top_p = nan; }), "top_p");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.min_p = -0.01; }), "min_p");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.min_p = 1.5; }), "min_p");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.repeat_last_n = -2; }), "repeat_last_n");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.repeat_penalty = 0; }), "repeat_penalty");
  ExpectRejected(ValidateWith([&](SamplingParams& p) { p.repeat_penalty = nan; }), "repeat_penalty");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.frequency_penalty = 2.5; }), "frequency_penalty");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.presence_penalty = -3; }), "presence_penalty");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.max_tokens = -2; }), "max_tokens");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.top_logprobs = kMaxTopLogprobs + 1; }), "top_logprobs");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.top_logprobs = -1; }), "top_logprobs");
}

TEST(SamplingParamsTest, RangeIsStatedInTheMessage) {
  const absl::Status status = ValidateWith([](SamplingParams& p) { p.top_p = 2; });
  EXPECT_NE(std::string(status.message()).find("(0, 1]"), std::string::npos) << status;
}

TEST(SamplingParamsTest, StopStringLimits) {
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.stop.assign(kMaxStopStrings + 1, "x"); }), "stop");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.stop = {"ok", ""}; }), "stop[1]");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.stop = {std::string(kMaxStopStringBytes + 1, 'x')}; }),
                 "stop[0]");
  ExpectRejected(ValidateWith([](SamplingParams& p) { p.stop = {"bad \xff byte"}; }), "UTF-8");
}

}  // namespace
}  // namespace octo
