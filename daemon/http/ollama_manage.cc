#include "daemon/http/ollama_manage.h"

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/http/json_fields.h"
#include "daemon/http/model_select.h"
#include "storage/bounded_json.h"

namespace octo {
namespace {

// Decomposition reports every chunk; the stream gets a line at most this
// often, and always the first and the last byte.
constexpr std::chrono::milliseconds kProgressInterval{250};

// Writes the steps as NDJSON lines, the stream started at the first.
class ProgressStream {
 public:
  explicit ProgressStream(HttpExchange& exchange) : exchange_(exchange) {}

  void On(const LoadProgress& progress) {
    const auto now = std::chrono::steady_clock::now();
    const bool first = !exchange_.responded();
    const bool last = progress.bytes_done == progress.bytes_total;
    if (!first && progress.bytes_done == done_) return;
    if (!first && !last && now - last_sent_ < kProgressInterval) return;
    done_ = progress.bytes_done;
    last_sent_ = now;
    Send({{"status", progress.stage}, {"total", progress.bytes_total}, {"completed", progress.bytes_done}});
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
  // A client that hung up misses the rest; the import goes on.
  void Send(const nlohmann::json& line) {
    if (!exchange_.responded() && !exchange_.StartStream("application/x-ndjson")) return;
    exchange_.Send(line.dump() + "\n");
  }

  HttpExchange& exchange_;
  uint64_t done_ = 0;  // the bytes the last line said
  std::chrono::steady_clock::time_point last_sent_{};
};

// The GGUF an old-style Modelfile imports: its one FROM line. Any other
// instruction would change the model, and is refused naming it.
absl::StatusOr<std::string> FromOfModelfile(const FieldReader& fields, const std::string& modelfile) {
  std::string from;
  for (absl::string_view line : absl::StrSplit(modelfile, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const absl::string_view instruction = line.substr(0, line.find_first_of(" \t"));
    if (!absl::EqualsIgnoreCase(instruction, "FROM")) {
      return fields.Error("modelfile", absl::StrCat("only FROM is supported, not ", QuotePrefix(instruction)));
    }
    from = std::string(absl::StripAsciiWhitespace(line.substr(instruction.size())));
  }
  if (from.empty()) return fields.Error("modelfile", "has no FROM line naming the GGUF file");
  return from;
}

}  // namespace

void ServeCreate(Runtime& runtime, const HttpRequest& request, HttpExchange& exchange) {
  absl::StatusOr<nlohmann::json> body = ParseJsonObject(request.body);
  if (!body.ok()) return exchange.ReplyError(body.status());
  const FieldReader fields(*body);
  std::string name, from, modelfile;
  bool stream = true;
  absl::Status read = fields.String("name", &name);  // the older spelling
  if (read.ok()) read = fields.String("model", &name);
  if (read.ok() && name.empty()) read = fields.Error("model", "required");
  if (read.ok()) read = fields.String("from", &from);
  if (read.ok()) read = fields.String("modelfile", &modelfile);
  if (read.ok()) read = fields.Bool("stream", &stream);
  for (const char* key : {"quantize", "files", "adapters", "template", "system", "parameters", "messages"}) {
    if (read.ok() && fields.Find(key) != nullptr) {
      read = fields.Unsupported(key, "octod imports a GGUF as it is; make the GGUF you want first");
    }
  }
  if (!read.ok()) return exchange.ReplyError(read);
  if (from.empty() && !modelfile.empty()) {
    absl::StatusOr<std::string> from_modelfile = FromOfModelfile(fields, modelfile);
    if (!from_modelfile.ok()) return exchange.ReplyError(from_modelfile.status());
    from = *std::move(from_modelfile);
  }
  if (absl::Status admin = RequireAdmin(request.caller, "creating a model"); !admin.ok()) {
    return exchange.ReplyError(admin);
  }
  if (!stream) {
    const absl::Status created = runtime.CreateModel(name, from, nullptr);
    if (!created.ok()) return exchange.ReplyError(created);
    return exchange.ReplyJson(200, {{"status", "success"}});
  }
  ProgressStream progress(exchange);
  progress.Finish(runtime.CreateModel(name, from, [&progress](const LoadProgress& step) { progress.On(step); }));
}

void ServeCopy(Runtime& runtime, const HttpRequest& request, HttpExchange& exchange) {
  absl::StatusOr<nlohmann::json> body = ParseJsonObject(request.body);
  if (!body.ok()) return exchange.ReplyError(body.status());
  const FieldReader fields(*body);
  std::string source, destination;
  absl::Status read = fields.Require("source");
  if (read.ok()) read = fields.Require("destination");
  if (read.ok()) read = fields.String("source", &source);
  if (read.ok()) read = fields.String("destination", &destination);
  if (read.ok()) read = RequireAdmin(request.caller, "copying a model");
  if (read.ok()) read = runtime.CopyModel(ModelPathOf(source), ModelPathOf(destination));
  if (!read.ok()) return exchange.ReplyError(read);
  exchange.ReplyText(200, "application/json", "");
}

void ServeDelete(Runtime& runtime, const HttpRequest& request, HttpExchange& exchange) {
  absl::StatusOr<nlohmann::json> body = ParseJsonObject(request.body);
  if (!body.ok()) return exchange.ReplyError(body.status());
  const FieldReader fields(*body);
  std::string name;
  absl::Status read = fields.String("name", &name);  // the older spelling
  if (read.ok()) read = fields.String("model", &name);
  if (read.ok() && name.empty()) read = fields.Error("model", "required");
  if (read.ok()) read = RequireAdmin(request.caller, "deleting a model");
  if (read.ok()) read = runtime.DeleteModel(ModelPathOf(name));
  if (!read.ok()) return exchange.ReplyError(read);
  exchange.ReplyText(200, "application/json", "");
}

void ServePull(const HttpRequest&, HttpExchange& exchange) {
  exchange.ReplyError(absl::UnimplementedError(
      "octod pulls from no registry: put a GGUF file under the models root (served by its file name), or "
      "import one with /api/create {\"model\": NAME, \"from\": PATH} or `octo-ctl decompose FILE.gguf DIR`"));
}

}  // namespace octo
