#include "daemon/http/http_connection.h"

#include <cstdio>
#include <exception>

#include "absl/strings/str_cat.h"
#include "boost/asio/write.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http.hpp"
#include "daemon/http/http_server.h"
#include "daemon/http/metrics.h"
#include "daemon/server/credentials.h"
#include "storage/bounded_json.h"

namespace octo {
namespace {

namespace http = boost::beast::http;

// Who sent a request with these credentials; nullopt: nobody octod knows.
std::optional<Caller> Identify(const Credentials& credentials, absl::string_view authorization) {
  if (!credentials.any()) return Caller{"anonymous", true};
  return credentials.Match(authorization);
}

// The route's handler. Handlers validate every field before using it
// (json_fields.h); this is the net under a check that is missing: the
// request fails with 500 and the connection closes, where an exception
// escaping the connection's thread would end octod.
void DispatchContained(const HttpRouter& router, const HttpRequest& request, HttpExchange& exchange) {
  try {
    router.Dispatch(request, exchange);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "octod: http: %s %s failed: %s\n", request.method.c_str(), QuotePrefix(request.path).c_str(),
                 e.what());
    if (!exchange.responded()) {
      exchange.ReplyError(absl::InternalError("octod could not handle this request; its log says why"), 500);
    }
    exchange.CloseConnection();
  }
}

}  // namespace

namespace {

// A browser's CORS preflight: OPTIONS with an Origin, asking for a method.
bool IsPreflight(const http::request<http::string_body>& message) {
  return message.method() == http::verb::options && !message[http::field::origin].empty() &&
         !message[http::field::access_control_request_method].empty();
}

}  // namespace

bool IsOpenRoute(absl::string_view method, absl::string_view path) {
  return (method == "GET" || method == "HEAD") && path == "/health";
}

void ServeHttpConnection(SocketStream& stream, const HttpRouter& router, const HttpConnectionOptions& options) {
  using Clock = std::chrono::steady_clock;
  boost::beast::flat_buffer buffer;
  stream.set_read_deadline(Clock::now() + options.header_timeout);
  if (!stream.Handshake()) return;  // TLS: a plain-text client, or a client certificate not trusted
  // Each answered request, by route and status (/metrics), counted as its
  // reply is decided.
  auto count = [&](const HttpRequest& request, HttpExchange& exchange) {
    if (options.request_counts == nullptr) return;
    exchange.OnReply([&counts = *options.request_counts, route = router.RouteOf(request)](int status) {
      counts.Count(route, status);
    });
  };
  for (bool first = true;; first = false) {
    // A new connection has header_timeout to send its request; a kept-alive
    // one idle_timeout to start the next, then header_timeout for the rest.
    if (!first && buffer.size() == 0 && !stream.WaitReadable(options.idle_timeout)) return;
    stream.set_read_deadline(Clock::now() + options.header_timeout);
    http::request_parser<http::string_body> parser;
    parser.body_limit(kMaxHttpBodyBytes);
    parser.header_limit(kMaxHttpHeaderBytes);
    HttpRequest request;
    boost::system::error_code ec;
    http::read_header(stream, buffer, parser, ec);
    request.received = Clock::now();
    const http::request<http::string_body>& message = parser.get();
    const unsigned version = message.version() == 10 ? 10 : 11;
    if (!ec) {
      const boost::beast::string_view beast_target = message.target();
      const absl::string_view target(beast_target.data(), beast_target.size());
      request.method = std::string(message.method_string());
      request.path = std::string(target.substr(0, target.find('?')));
      const boost::beast::string_view origin = message[http::field::origin];
      if (OriginAllowed(options.cors_origins, absl::string_view(origin.data(), origin.size()))) {
        request.allowed_origin = std::string(origin);
      }
      const boost::beast::string_view authorization = message[http::field::authorization];
      std::optional<Caller> caller =
          Identify(options.credentials, absl::string_view(authorization.data(), authorization.size()));
      if (caller.has_value()) {
        request.caller = *std::move(caller);
      } else if (!IsOpenRoute(request.method, request.path) && !IsPreflight(message)) {
        // Refused from the headers: the body (up to 8 MiB) is never read.
        HttpExchange exchange(stream, request, version, /*keep_alive=*/false);
        count(request, exchange);
        exchange.ReplyError(absl::UnauthenticatedError(
            "missing or wrong API key: send the header 'Authorization: Bearer <token>' with octod's token"));
        stream.LingeringClose();
        return;
      }
    }
    if (!ec && message[http::field::expect] == "100-continue") {
      // curl asks before sending a body over 1 KiB; say yes rather than make it wait a second.
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      boost::asio::write(stream, boost::asio::buffer(kContinue, sizeof(kContinue) - 1), ec);
    }
    stream.set_read_deadline(Clock::now() + options.body_timeout);
    if (!ec) http::read(stream, buffer, parser, ec);
    stream.set_read_deadline(Clock::time_point::max());  // a handler's reads (none) and its writes have their own limits
    if (ec == http::error::end_of_stream || ec == boost::asio::error::eof || ec == boost::asio::error::timed_out ||
        ec == boost::asio::error::operation_aborted || ec == boost::asio::error::connection_reset) {
      return;  // the client closed, missed a deadline, or octod is stopping
    }
    HttpExchange exchange(stream, request, version, !ec && message.keep_alive());
    if (ec) {
      // Bad HTTP: say what and close (the rest of the stream is not a request).
      const int code = ec == http::error::body_limit ? 413 : ec == http::error::header_limit ? 431 : 400;
      const std::string limit = code == 413 ? absl::StrCat(" (the limit is ", kMaxHttpBodyBytes, " bytes)") : "";
      exchange.ReplyError(absl::InvalidArgumentError(absl::StrCat("bad HTTP request: ", ec.message(), limit)), code);
      stream.LingeringClose();
      return;
    }
    request.body = message.body();
    count(request, exchange);
    if (IsPreflight(message)) {
      if (request.allowed_origin.empty()) {
        exchange.ReplyError(absl::PermissionDeniedError(
            "this origin may not call octod from a browser (octod --http-cors-origins admits more)"));
      } else {
        const boost::beast::string_view asked = message[http::field::access_control_request_headers];
        exchange.ReplyPreflight(absl::string_view(asked.data(), asked.size()));
      }
      if (!exchange.keep_alive()) return;
      continue;
    }
    DispatchContained(router, request, exchange);
    if (!exchange.responded()) exchange.ReplyError(absl::InternalError("the handler gave no response"));
    if (!exchange.keep_alive()) return;
  }
}

}  // namespace octo
