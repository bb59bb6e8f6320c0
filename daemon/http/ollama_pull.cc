#include "daemon/http/ollama_pull.h"

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/http/json_fields.h"
#include "daemon/http/model_select.h"

namespace octo {
namespace {

// Decomposition reports often; the stream gets a line at most this often
// (and always at a stage's first and last byte).
constexpr std::chrono::milliseconds kProgressInterval{250};

// Writes the load's steps as NDJSON lines, the stream started at the first.
class PullStream {
 public:
  explicit PullStream(HttpExchange& exchange) : exchange_(exchange) {}

  void On(const LoadProgress& progress) {
    const auto now = std::chrono::steady_clock::now();
    const bool new_stage = progress.stage != stage_;
    if (!new_stage && progress.bytes_done == done_) return;
    const bool stage_done = progress.bytes_total > 0 && progress.bytes_done == progress.bytes_total;
    if (!new_stage && !stage_done && now - last_sent_ < kProgressInterval) return;
    stage_ = progress.stage;
    done_ = progress.bytes_done;
    last_sent_ = now;
    nlohmann::json line = {{"status", progress.stage}};
    if (progress.bytes_total > 0) {
      line["total"] = progress.bytes_total;
      line["completed"] = progress.bytes_done;
    }
    Send(line);
  }

  // The last line: success, or the error (the whole reply when nothing was
  // streamed yet).
  void Finish(const absl::Status& status) {
    if (!status.ok() && !exchange_.responded()) return exchange_.ReplyError(status);
    Send(status.ok() ? nlohmann::json{{"status", "success"}}
                     : nlohmann::json{{"error", std::string(status.message())}});
    exchange_.EndStream();
  }

 private:
  // A client that hung up misses the rest; the load goes on (another
  // request may want the model).
  void Send(const nlohmann::json& line) {
    if (!exchange_.responded() && !exchange_.StartStream("application/x-ndjson")) return;
    exchange_.Send(line.dump() + "\n");
  }

  HttpExchange& exchange_;
  std::string stage_;
  uint64_t done_ = 0;  // the bytes the last line said
  std::chrono::steady_clock::time_point last_sent_{};
};

}  // namespace

void ServePull(Runtime& runtime, const HttpRequest& request, HttpExchange& exchange) {
  absl::StatusOr<nlohmann::json> body = ParseJsonObject(request.body);
  if (!body.ok()) return exchange.ReplyError(body.status());
  const FieldReader fields(*body);
  std::string name;
  bool stream = true, insecure = false;  // insecure: Ollama's, for registries; nothing to do here
  absl::Status read = fields.String("name", &name);  // the older spelling
  if (read.ok()) read = fields.String("model", &name);
  if (read.ok()) read = fields.Bool("stream", &stream);
  if (read.ok()) read = fields.Bool("insecure", &insecure);
  if (!read.ok()) return exchange.ReplyError(read);
  if (!stream) {
    const absl::Status loaded = SelectModel(runtime, name, request.caller).status();
    if (!loaded.ok()) return exchange.ReplyError(loaded);
    return exchange.ReplyJson(200, {{"status", "success"}});
  }
  PullStream pull(exchange);
  const absl::Status loaded =
      SelectModel(runtime, name, request.caller, [&pull](const LoadProgress& progress) { pull.On(progress); })
          .status();
  pull.Finish(loaded);
}

}  // namespace octo
