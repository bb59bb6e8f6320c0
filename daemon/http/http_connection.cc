#include "daemon/http/http_connection.h"

#include <cstdio>
#include <exception>

#include "absl/strings/str_cat.h"
#include "boost/asio/write.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http.hpp"
#include "daemon/http/http_server.h"
#include "daemon/server/bearer_token.h"
#include "storage/bounded_json.h"

namespace octo {
namespace {

namespace http = boost::beast::http;

bool Authorized(const std::optional<std::string>& token, absl::string_view authorization) {
  return !token.has_value() || BearerTokenMatches(authorization, *token);
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

void ServeHttpConnection(SocketStream& stream, const HttpRouter& router, const HttpConnectionOptions& options) {
  boost::beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(kMaxHttpBodyBytes);
    parser.header_limit(kMaxHttpHeaderBytes);
    HttpRequest request;
    boost::system::error_code ec;
    http::read_header(stream, buffer, parser, ec);
    request.received = std::chrono::steady_clock::now();
    if (!ec && parser.get()[http::field::expect] == "100-continue") {
      // curl asks before sending a body over 1 KiB; say yes rather than make it wait a second.
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      boost::asio::write(stream, boost::asio::buffer(kContinue, sizeof(kContinue) - 1), ec);
    }
    if (!ec) http::read(stream, buffer, parser, ec);
    if (ec == http::error::end_of_stream || ec == boost::asio::error::eof || ec == boost::asio::error::timed_out ||
        ec == boost::asio::error::operation_aborted || ec == boost::asio::error::connection_reset) {
      return;  // the client closed, went quiet, or octod is stopping
    }
    const http::request<http::string_body>& message = parser.get();
    const boost::beast::string_view beast_target = message.target();
    const absl::string_view target(beast_target.data(), beast_target.size());
    request.method = std::string(message.method_string());
    request.path = std::string(target.substr(0, target.find('?')));
    HttpExchange exchange(stream, request, message.version() == 10 ? 10 : 11, !ec && message.keep_alive());
    if (ec) {
      // Bad HTTP: say what and close (the rest of the stream is not a request).
      const int code = ec == http::error::body_limit ? 413 : ec == http::error::header_limit ? 431 : 400;
      const std::string limit = code == 413 ? absl::StrCat(" (the limit is ", kMaxHttpBodyBytes, " bytes)") : "";
      exchange.ReplyError(absl::InvalidArgumentError(absl::StrCat("bad HTTP request: ", ec.message(), limit)), code);
      stream.LingeringClose();
      return;
    }
    request.body = message.body();
    const boost::beast::string_view authorization = message[http::field::authorization];
    if (!Authorized(options.token, absl::string_view(authorization.data(), authorization.size()))) {
      exchange.ReplyError(absl::UnauthenticatedError(
          "missing or wrong API key: send the header 'Authorization: Bearer <token>' with octod's token"));
    } else {
      DispatchContained(router, request, exchange);
    }
    if (!exchange.responded()) exchange.ReplyError(absl::InternalError("the handler gave no response"));
    if (!exchange.keep_alive()) return;
  }
}

}  // namespace octo
