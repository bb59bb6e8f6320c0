// One HTTP request and its response, as a route handler sees them.
//
// A handler answers exactly once: either Reply*() (a whole response), or
// StartStream() followed by Send()s and EndStream() (a chunked response:
// server-sent events or NDJSON). A handler that answers nothing gets a 500
// from the server. Send returns false once the client is gone; ClientGone()
// tells the same without writing (a client that hung up while its tokens
// are being computed).
//
// Threads: an exchange belongs to its connection's thread.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/server/credentials.h"
#include "nlohmann/json.hpp"

namespace octo {

class SocketStream;

struct HttpRequest {
  std::string method;  // "GET", "POST", "HEAD", ...
  std::string path;    // the target without its query string
  std::string body;
  std::chrono::steady_clock::time_point received;  // when its headers arrived
  Caller caller;  // who sent it (credentials.h)
  // Its Origin header when cors.h admits it: every reply names it in
  // Access-Control-Allow-Origin; "" for none.
  std::string allowed_origin;
};

class HttpExchange {
 public:
  // `version` is the request's (10 or 11); `keep_alive` what it asked for.
  HttpExchange(SocketStream& stream, const HttpRequest& request, unsigned version, bool keep_alive);

  void ReplyJson(int http_code, const nlohmann::json& body);
  void ReplyText(int http_code, absl::string_view content_type, std::string body);
  // The error body for the request's path (http_status.h), with the code
  // HttpCodeFor gives, or `http_code` when set.
  void ReplyError(const absl::Status& status, int http_code = 0);

  // A CORS preflight's answer (cors.h): 204 allowing the request's origin,
  // the API's methods and `headers` (what the browser asked for).
  void ReplyPreflight(absl::string_view headers);

  // 200 with a body of unknown length (chunked on HTTP/1.1). False when the
  // client is gone.
  bool StartStream(absl::string_view content_type);
  bool Send(absl::string_view data);
  void EndStream();

  bool ClientGone() const;
  bool responded() const { return responded_; }
  int status() const { return status_; }  // the reply's HTTP status, 0 before it
  // Called with the reply's status as it is decided, before a byte of it is
  // written (a client that reads the reply finds it counted: /metrics).
  void OnReply(std::function<void(int)> on_reply) { on_reply_ = std::move(on_reply); }
  // The connection closes after this exchange (a handler that failed
  // half-way may have left a stream unfinished).
  void CloseConnection() { keep_alive_ = false; }
  // Whether the connection may carry another request after this one.
  bool keep_alive() const { return keep_alive_ && !broken_; }

 private:
  SocketStream& stream_;
  const HttpRequest& request_;
  unsigned version_;
  bool keep_alive_;
  bool responded_ = false;
  int status_ = 0;
  std::function<void(int)> on_reply_;
  void Replied(int status);
  bool streaming_ = false;
  bool broken_ = false;  // a write failed
};

}  // namespace octo
