// The pieces under the HTTP routes: JSON field reading, status codes and
// error bodies, and the --http-listen address.
#include "daemon/http/cors.h"
#include "daemon/http/http_status.h"
#include "daemon/http/json_fields.h"
#include "daemon/http/listen_address.h"
#include "gtest/gtest.h"

namespace octo {
namespace {

using nlohmann::json;

TEST(JsonFields, BodyThatIsNotJsonSaysWhere) {
  const absl::StatusOr<json> parsed = ParseJsonObject("{\"model\": ");
  ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("not valid JSON"), std::string::npos) << parsed.status();
  EXPECT_NE(parsed.status().message().find("column"), std::string::npos) << parsed.status();
  EXPECT_EQ(ParseJsonObject("[1, 2]").status().message(), "the body must be a JSON object, not an array");
  EXPECT_EQ(ParseJsonObject("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JsonFields, AbsentAndNullKeepTheDefault) {
  const json body = {{"temperature", nullptr}};
  const FieldReader fields(body);
  double temperature = 0.7;
  ASSERT_TRUE(fields.Number("temperature", &temperature).ok());
  ASSERT_TRUE(fields.Number("top_p", &temperature).ok());
  EXPECT_EQ(temperature, 0.7);
}

TEST(JsonFields, WrongTypeNamesTheFieldAndCarriesItAsParam) {
  const json body = {{"options", {{"temperature", "hot"}}}};
  const FieldReader options(body["options"], "options.");
  double temperature = 0;
  const absl::Status status = options.Number("temperature", &temperature);
  EXPECT_EQ(status.message(), "options.temperature: expected a number, got a string");
  EXPECT_EQ(ParamOf(status), "options.temperature");
}

TEST(JsonFields, IntegersAreCheckedForFractionAndRange) {
  const json body = {{"a", 3.0}, {"b", 3.5}, {"c", 70000}, {"d", -1}, {"e", true}, {"f", 18446744073709551615ull}};
  const FieldReader fields(body);
  int32_t value = 0;
  EXPECT_TRUE(fields.Integer("a", 0, 10, &value).ok());
  EXPECT_EQ(value, 3);
  EXPECT_EQ(fields.Integer("b", 0, 10, &value).message(), "b: expected an integer, got 3.5");
  EXPECT_EQ(fields.Integer("c", 0, 65535, &value).message(), "c: 70000 is out of range [0, 65535]");
  EXPECT_EQ(fields.Integer("d", 0, 10, &value).message(), "d: -1 is out of range [0, 10]");
  EXPECT_EQ(fields.Integer("e", 0, 10, &value).message(), "e: expected an integer, got a boolean");
  int64_t wide = 0;
  EXPECT_EQ(fields.Integer("f", int64_t{0}, int64_t{1} << 62, &wide).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(value, 3) << "a failed read leaves the value alone";
}

TEST(JsonFields, StringsTakeOneOrAList) {
  const json body = {{"one", "x"}, {"list", {"a", "b"}}, {"mixed", {"a", 1}}};
  const FieldReader fields(body);
  std::vector<std::string> out;
  ASSERT_TRUE(fields.Strings("one", &out).ok());
  EXPECT_EQ(out, std::vector<std::string>{"x"});
  ASSERT_TRUE(fields.Strings("list", &out).ok());
  EXPECT_EQ(out, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(fields.Strings("mixed", &out).message(), "mixed: item 1: expected a string, got a number");
  EXPECT_EQ(fields.Require("missing").message(), "missing: required");
}

// cors.h's patterns: '*' any run of characters, the defaults local only.
TEST(Cors, PatternsMatchAsOllamasOrigins) {
  const std::vector<std::string> defaults = DefaultCorsOrigins();
  for (const char* local : {"http://localhost", "https://localhost:8443", "http://127.0.0.1:3000", "http://0.0.0.0:1",
                            "app://obsidian.md", "file://", "tauri://localhost", "vscode-webview://abc"}) {
    EXPECT_TRUE(OriginAllowed(defaults, local)) << local;
  }
  for (const char* other : {"https://example.com", "http://localhost.example.com", "http://127.0.0.1.nip.io",
                            "null", "", "http://localhostx"}) {
    EXPECT_FALSE(OriginAllowed(defaults, other)) << other;
  }
  EXPECT_TRUE(OriginAllowed({"*"}, "https://anything.example"));
  EXPECT_TRUE(OriginAllowed({"https://*.example.com"}, "https://a.b.example.com"));
  EXPECT_FALSE(OriginAllowed({"https://*.example.com"}, "https://example.com"));
  EXPECT_TRUE(OriginAllowed({"a*b*c"}, "aXbYbZc"));
  EXPECT_FALSE(OriginAllowed({"a*b*c"}, "aXbYbZ"));
  EXPECT_TRUE(CheckCorsOrigins(defaults).ok());
  EXPECT_FALSE(CheckCorsOrigins({""}).ok());
  EXPECT_FALSE(CheckCorsOrigins(std::vector<std::string>(kMaxCorsOrigins + 1, "x")).ok());
}

TEST(HttpStatus, CodesFollowTheTable) {
  EXPECT_EQ(HttpCodeFor(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpCodeFor(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpCodeFor(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpCodeFor(absl::StatusCode::kFailedPrecondition), 409);
  EXPECT_EQ(HttpCodeFor(absl::StatusCode::kAlreadyExists), 409);
  EXPECT_EQ(HttpCodeFor(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpCodeFor(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpCodeFor(absl::StatusCode::kDataLoss), 500);
}

TEST(HttpStatus, OpenAiPathsGetOpenAiBodies) {
  const json body = ErrorBody("/v1/chat/completions", ModelNotFound("llama9"));
  EXPECT_EQ(body["error"]["message"], "model 'llama9' not found");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["code"], "model_not_found");
  EXPECT_EQ(body["error"]["param"], "model");
  EXPECT_EQ(ErrorBody("/v1/models", absl::UnauthenticatedError("no key"))["error"]["code"], "invalid_api_key");
  EXPECT_EQ(ErrorBody("/v1/models", absl::DataLossError("bad"))["error"]["type"], "server_error");
}

TEST(HttpStatus, OtherPathsGetOllamaBodies) {
  EXPECT_EQ(ErrorBody("/api/chat", ModelNotFound("x")), json({{"error", "model 'x' not found"}}));
}

TEST(HttpStatus, JsonTextReplacesBrokenUtf8) {
  EXPECT_EQ(JsonText(json("a\xff")), "\"a\xEF\xBF\xBD\"");
}

TEST(HttpListen, ParsesHostsAndPorts) {
  absl::StatusOr<HttpListenAddress> address = ParseHttpListen("127.0.0.1:0");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(address->host, "127.0.0.1");
  EXPECT_EQ(address->port, 0);
  EXPECT_TRUE(address->loopback);
  address = ParseHttpListen("[::1]:11434");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(address->host, "::1");
  EXPECT_TRUE(address->loopback);
  address = ParseHttpListen("0.0.0.0:8080");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_FALSE(address->loopback);
}

TEST(HttpListen, BadAddressesSayWhy) {
  EXPECT_NE(ParseHttpListen("8080").status().message().find("host:port"), std::string::npos);
  EXPECT_NE(ParseHttpListen(":8080").status().message().find("no host"), std::string::npos);
  EXPECT_NE(ParseHttpListen("::1:8080").status().message().find("brackets"), std::string::npos);
  EXPECT_NE(ParseHttpListen("127.0.0.1:70000").status().message().find("0..65535"), std::string::npos);
  EXPECT_NE(ParseHttpListen("127.0.0.1:http").status().message().find("0..65535"), std::string::npos);
  EXPECT_EQ(ParseHttpListen("no-such-host.invalid:80").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace octo
