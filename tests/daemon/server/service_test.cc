// The service over a real unix socket, with a scripted FakeRuntime behind it.
#include "daemon/server/service.h"

#include <thread>

#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/daemon/server/test_server.h"

namespace octo {
namespace {

using testing::FakeScript;
using testing::FakeRuntime;
using testing::ScriptTokens;

struct Stream {
  std::vector<v1::GenerateResponse> messages;
  grpc::Status status;

  std::string Text() const {
    std::string text;
    for (const auto& m : messages) {
      if (m.has_token()) text += m.token().text();
      if (m.has_done()) text += m.done().tail();
    }
    return text;
  }
};

class ServiceTest : public ::testing::Test {
 protected:
  ServiceTest() : stub_(server_.UnixStub()) {
    server_.runtime().SetModels({testing::FakeModel("tiny"), testing::FakeModel("other", "qwen2", 2)},
                                /*load_first=*/true);
  }

  FakeRuntime& runtime() { return server_.runtime(); }

  Stream Generate(const v1::GenerateRequest& request) {
    grpc::ClientContext context;
    auto reader = stub_->Generate(&context, request);
    Stream stream;
    v1::GenerateResponse response;
    while (reader->Read(&response)) stream.messages.push_back(response);
    stream.status = reader->Finish();
    return stream;
  }

  static v1::GenerateRequest Prompt(const std::string& text) {
    v1::GenerateRequest request;
    request.set_prompt(text);
    return request;
  }

  testing::TestServer server_;
  std::unique_ptr<v1::Octo::Stub> stub_;
};

TEST_F(ServiceTest, StreamIsStartedThenTokensInOrderThenDone) {
  FakeScript script;
  script.tokens = ScriptTokens({"The", " cat", " sat"});
  script.finish_reason = "length";
  script.tail = "!";
  script.stats.prompt_tokens = 5;
  script.stats.decode_seconds = 0.5;
  script.stats.load_wait_seconds = 0.125;
  script.stats.seed = 99;
  runtime().SetScript(script);
  const Stream stream = Generate(Prompt("Once"));
  ASSERT_TRUE(stream.status.ok()) << stream.status.error_message();
  ASSERT_EQ(stream.messages.size(), 5u);
  ASSERT_TRUE(stream.messages[0].has_started());
  EXPECT_EQ(stream.messages[0].started().prompt_tokens(), 4);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(stream.messages[1 + i].has_token()) << i;
    EXPECT_EQ(stream.messages[1 + i].token().id(), 100 + i);
  }
  ASSERT_TRUE(stream.messages[4].has_done());
  const auto& done = stream.messages[4].done();
  EXPECT_EQ(done.finish_reason(), "length");
  EXPECT_EQ(done.stats().generated_tokens(), 3);
  EXPECT_DOUBLE_EQ(done.stats().tokens_per_second(), 6);
  EXPECT_EQ(done.stats().load_wait_seconds(), 0.125);
  EXPECT_EQ(done.stats().seed(), 99u);
  EXPECT_EQ(stream.Text(), "The cat sat!");
  EXPECT_EQ(runtime().last_job().prompt, "Once");
}

TEST_F(ServiceTest, LongStreamsKeepTheirOrder) {
  FakeScript script;
  std::vector<std::string> pieces;
  for (int i = 0; i < 2000; ++i) pieces.push_back(std::to_string(i) + ",");
  script.tokens = ScriptTokens(pieces);
  runtime().SetScript(script);
  const Stream stream = Generate(Prompt("count"));
  ASSERT_TRUE(stream.status.ok());
  ASSERT_EQ(stream.messages.size(), 2002u);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(stream.messages[1 + i].token().id(), 100 + i);
}

TEST_F(ServiceTest, ConcurrentStreamsEachGetTheirWholeStream) {
  FakeScript script;
  script.tokens = ScriptTokens({"a", "b", "c", "d", "e", "f", "g", "h"});
  script.token_delay = std::chrono::milliseconds(1);
  runtime().SetScript(script);
  std::vector<std::thread> clients;
  std::vector<Stream> streams(8);
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] { streams[i] = Generate(Prompt("p" + std::to_string(i))); });
  }
  for (std::thread& client : clients) client.join();
  for (const Stream& stream : streams) {
    EXPECT_TRUE(stream.status.ok());
    EXPECT_EQ(stream.Text(), "abcdefgh");
  }
  EXPECT_EQ(runtime().jobs_submitted(), 8);
}

TEST_F(ServiceTest, LogprobsAreSentOnlyWhenAskedFor) {
  const Stream plain = Generate(Prompt("x"));
  ASSERT_TRUE(plain.status.ok());
  EXPECT_EQ(plain.messages[1].token().top_size(), 0);
  EXPECT_EQ(plain.messages[1].token().logprob(), 0);
  v1::GenerateRequest request = Prompt("x");
  request.mutable_sampling()->set_top_logprobs(2);
  const Stream with = Generate(request);
  ASSERT_TRUE(with.status.ok());
  EXPECT_EQ(with.messages[1].token().logprob(), -0.25);
  EXPECT_EQ(with.messages[1].token().top_size(), 2);
}

TEST_F(ServiceTest, BadSamplingIsInvalidArgumentNamingTheField) {
  v1::GenerateRequest request = Prompt("x");
  request.mutable_sampling()->set_top_p(1.5);
  const Stream stream = Generate(request);
  EXPECT_EQ(stream.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(stream.status.error_message().find("top_p"), std::string::npos) << stream.status.error_message();
  EXPECT_TRUE(stream.messages.empty());
  EXPECT_EQ(runtime().jobs_submitted(), 0);
}

TEST_F(ServiceTest, OversizeChatIsRefusedBeforeTheCore) {
  v1::ChatRequest request;
  for (int i = 0; i < 300; ++i) request.add_messages()->set_role("user");
  grpc::ClientContext context;
  auto reader = stub_->Chat(&context, request);
  v1::GenerateResponse response;
  EXPECT_FALSE(reader->Read(&response));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("at most 256"), std::string::npos) << status.error_message();
}

TEST_F(ServiceTest, ChatCarriesMessagesAndSession) {
  grpc::ClientContext create_context;
  v1::CreateSessionResponse session;
  ASSERT_TRUE(stub_->CreateSession(&create_context, v1::CreateSessionRequest(), &session).ok());
  v1::ChatRequest request;
  request.set_session_id(session.session_id());
  request.set_chat_template("chatml");
  v1::ChatMessage* message = request.add_messages();
  message->set_role("user");
  message->set_content("Hello?");
  grpc::ClientContext context;
  auto reader = stub_->Chat(&context, request);
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.started().session_id(), session.session_id());
  while (reader->Read(&response)) {
  }
  ASSERT_TRUE(reader->Finish().ok());
  const GenerateJob job = runtime().last_job();
  EXPECT_TRUE(job.chat);
  EXPECT_EQ(job.session_id, session.session_id());
  EXPECT_EQ(job.chat_template, "chatml");
  ASSERT_EQ(job.messages.size(), 1u);
  EXPECT_EQ(job.messages[0].content, "Hello?");
}

TEST_F(ServiceTest, UnknownSessionIsNotFound) {
  v1::GenerateRequest request = Prompt("x");
  request.set_session_id("nope");
  EXPECT_EQ(Generate(request).status.error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext context;
  v1::CloseSessionRequest close;
  close.set_session_id("nope");
  v1::CloseSessionResponse closed;
  const grpc::Status status = stub_->CloseSession(&context, close, &closed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "no session 'nope'");
}

TEST_F(ServiceTest, NoModelIsFailedPrecondition) {
  grpc::ClientContext context;
  v1::UnloadModelResponse unloaded;
  ASSERT_TRUE(stub_->UnloadModel(&context, v1::UnloadModelRequest(), &unloaded).ok());
  EXPECT_EQ(Generate(Prompt("x")).status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(ServiceTest, FailureMidStreamEndsWithItsCodeAfterTheTokens) {
  FakeScript script;
  script.tokens = ScriptTokens({"a", "b"});
  script.failure = absl::DataLossError("layer 3: checksum mismatch");
  runtime().SetScript(script);
  const Stream stream = Generate(Prompt("x"));
  EXPECT_EQ(stream.status.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_EQ(stream.status.error_message(), "layer 3: checksum mismatch");
  ASSERT_EQ(stream.messages.size(), 3u) << "started and both tokens arrive first";
  EXPECT_EQ(stream.Text(), "ab");
}

// The client cancels mid-stream: the job is cancelled at once and its sink
// freed (nothing of the call left in the runtime).
TEST_F(ServiceTest, ClientCancelCancelsTheJobAndFreesIt) {
  FakeScript script;
  script.tokens = ScriptTokens({"a", "b"});
  script.hold = true;  // then generate "forever"
  runtime().SetScript(script);
  grpc::ClientContext context;
  auto reader = stub_->Generate(&context, Prompt("x"));
  v1::GenerateResponse response;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(runtime().jobs_running(), 1);
  context.TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(runtime().WaitFor([&] { return runtime().jobs_cancelled() == 1; }));
  EXPECT_TRUE(runtime().WaitFor([&] { return runtime().jobs_running() == 0; }));
  EXPECT_TRUE(runtime().WaitFor([&] { return runtime().sinks_alive() == 0; }));
}

// Cancels that land while a write is in flight (a fast stream always has
// one): every call must still finish, or the server's Shutdown waits for it
// forever and its sink is never freed.
TEST_F(ServiceTest, CancelDuringAWriteStillFinishesTheCall) {
  constexpr int kCalls = 20;
  FakeScript script;
  script.tokens = ScriptTokens(std::vector<std::string>(2000, "t"));
  script.hold = true;
  runtime().SetScript(script);
  for (int call = 0; call < kCalls; ++call) {
    grpc::ClientContext context;
    auto reader = stub_->Generate(&context, Prompt("x"));
    v1::GenerateResponse response;
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(reader->Read(&response));
    context.TryCancel();
    while (reader->Read(&response)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(runtime().WaitFor([&] { return runtime().jobs_cancelled() == kCalls && runtime().jobs_running() == 0; }));
  ASSERT_TRUE(runtime().WaitFor([&] { return runtime().sinks_alive() == 0; }))
      << runtime().sinks_alive() << " of " << kCalls << " cancelled calls never finished";
}

// The client disappears without cancelling (its call is dropped when the
// context goes away): same outcome.
TEST_F(ServiceTest, ClientDisconnectCancelsTheJob) {
  FakeScript script;
  script.tokens = ScriptTokens({"a"});
  script.hold = true;
  runtime().SetScript(script);
  {
    auto channel_stub = server_.UnixStub();
    grpc::ClientContext context;
    auto reader = channel_stub->Generate(&context, Prompt("x"));
    v1::GenerateResponse response;
    ASSERT_TRUE(reader->Read(&response));
    ASSERT_TRUE(reader->Read(&response));
  }  // reader, context and channel dropped mid-stream
  EXPECT_TRUE(runtime().WaitFor([&] { return runtime().jobs_cancelled() == 1; }));
  EXPECT_TRUE(runtime().WaitFor([&] { return runtime().jobs_running() == 0 && runtime().sinks_alive() == 0; }));
}

TEST_F(ServiceTest, DeadlineCancelsTheJob) {
  FakeScript script;
  script.hold = true;
  runtime().SetScript(script);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  auto reader = stub_->Generate(&context, Prompt("x"));
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(runtime().WaitFor([&] { return runtime().jobs_cancelled() == 1 && runtime().jobs_running() == 0; }));
}

// Shutdown cancels running jobs: their clients get the tokens so far, then
// UNAVAILABLE (the core's status for jobs ended by shutdown).
TEST_F(ServiceTest, RuntimeShutdownEndsStreamsUnavailable) {
  FakeScript script;
  script.tokens = ScriptTokens({"a"});
  script.hold = true;
  runtime().SetScript(script);
  grpc::ClientContext context;
  auto reader = stub_->Generate(&context, Prompt("x"));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.token().text(), "a");
  runtime().Shutdown();
  EXPECT_FALSE(reader->Read(&response));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "octod is shutting down");
  EXPECT_EQ(Generate(Prompt("y")).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  grpc::ClientContext health_context;
  v1::HealthResponse health;
  ASSERT_TRUE(stub_->Health(&health_context, v1::HealthRequest(), &health).ok());
  EXPECT_FALSE(health.serving());
}

TEST_F(ServiceTest, HealthAndStatus) {
  RuntimeReport report;
  report.layers.resize(4);
  report.layers[0].pinned = report.layers[0].resident = true;
  report.backend = "cpu (fake)";
  report.kv_used_bytes = 1234;
  runtime().SetReport(report);
  grpc::ClientContext health_context;
  v1::HealthResponse health;
  ASSERT_TRUE(stub_->Health(&health_context, v1::HealthRequest(), &health).ok());
  EXPECT_TRUE(health.serving());
  EXPECT_TRUE(health.model_loaded());
  EXPECT_FALSE(health.loader_running());
  grpc::ClientContext status_context;
  v1::GetStatusResponse status;
  ASSERT_TRUE(stub_->GetStatus(&status_context, v1::GetStatusRequest(), &status).ok());
  EXPECT_EQ(status.version(), "test");
  EXPECT_EQ(status.model().path(), "tiny");
  EXPECT_EQ(status.layers_size(), 4);
  EXPECT_TRUE(status.layers(0).pinned());
  EXPECT_EQ(status.backend(), "cpu (fake)");
  EXPECT_EQ(status.kv_used_bytes(), 1234u);
}

TEST_F(ServiceTest, TokenizeAndDetokenize) {
  grpc::ClientContext context;
  v1::TokenizeRequest request;
  request.set_text("hi");
  request.set_add_bos(true);
  v1::TokenizeResponse tokens;
  ASSERT_TRUE(stub_->Tokenize(&context, request, &tokens).ok());
  EXPECT_EQ(std::vector<int32_t>(tokens.tokens().begin(), tokens.tokens().end()), (std::vector<int32_t>{1, 'h', 'i'}));
  EXPECT_EQ(tokens.pieces(0), "<s>");
  grpc::ClientContext detokenize_context;
  v1::DetokenizeRequest back;
  back.add_tokens('o');
  back.add_tokens('k');
  v1::DetokenizeResponse text;
  ASSERT_TRUE(stub_->Detokenize(&detokenize_context, back, &text).ok());
  EXPECT_EQ(text.text(), "ok");
  grpc::ClientContext bad_context;
  back.add_tokens(100000);
  EXPECT_EQ(stub_->Detokenize(&bad_context, back, &text).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServiceTest, SetResidencySendsOnlyWhatIsSet) {
  grpc::ClientContext context;
  v1::SetResidencyRequest request;
  request.set_pin_first(3);
  request.set_budget_bytes(1 << 30);
  v1::SetResidencyResponse response;
  ASSERT_TRUE(stub_->SetResidency(&context, request, &response).ok());
  EXPECT_EQ(response.residency().pin_first(), 3u);
  EXPECT_EQ(response.residency().budget_bytes(), 1u << 30);
  const std::vector<ResidencyChange> changes = runtime().residency_changes();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].pin_first, std::optional<uint32_t>(3));
  EXPECT_FALSE(changes[0].pin_last.has_value());
  EXPECT_FALSE(changes[0].auto_budget.has_value());
  grpc::ClientContext bad_context;
  v1::SetResidencyRequest zero;
  zero.set_budget_bytes(0);
  EXPECT_EQ(stub_->SetResidency(&bad_context, zero, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServiceTest, ModelsLoadUnloadList) {
  grpc::ClientContext list_context;
  v1::ListModelsResponse models;
  ASSERT_TRUE(stub_->ListModels(&list_context, v1::ListModelsRequest(), &models).ok());
  ASSERT_EQ(models.models_size(), 2);
  EXPECT_TRUE(models.models(0).loaded());
  EXPECT_FALSE(models.models(1).loaded());

  grpc::ClientContext load_context;
  v1::LoadModelRequest load;
  load.set_path("other");
  v1::LoadModelResponse loaded;
  ASSERT_TRUE(stub_->LoadModel(&load_context, load, &loaded).ok());
  EXPECT_EQ(loaded.model().architecture(), "qwen2");
  EXPECT_TRUE(loaded.model().loaded());

  grpc::ClientContext missing_context;
  load.set_path("missing");
  const grpc::Status missing = stub_->LoadModel(&missing_context, load, &loaded);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(missing.error_message().find("missing"), std::string::npos);

  grpc::ClientContext unload_context, again_context;
  v1::UnloadModelResponse unloaded;
  EXPECT_TRUE(stub_->UnloadModel(&unload_context, v1::UnloadModelRequest(), &unloaded).ok());
  EXPECT_EQ(stub_->UnloadModel(&again_context, v1::UnloadModelRequest(), &unloaded).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(ServiceTest, SessionsAreCreatedAndClosed) {
  grpc::ClientContext create_context;
  v1::CreateSessionRequest create;
  create.set_context_length(1024);
  v1::CreateSessionResponse session;
  ASSERT_TRUE(stub_->CreateSession(&create_context, create, &session).ok());
  EXPECT_FALSE(session.session_id().empty());
  EXPECT_EQ(session.context_length(), 1024u);
  grpc::ClientContext close_context;
  v1::CloseSessionRequest close;
  close.set_session_id(session.session_id());
  v1::CloseSessionResponse closed;
  EXPECT_TRUE(stub_->CloseSession(&close_context, close, &closed).ok());
  grpc::ClientContext too_long_context;
  create.set_context_length(1u << 30);
  EXPECT_EQ(stub_->CreateSession(&too_long_context, create, &session).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace octo
