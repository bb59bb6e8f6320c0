#include "daemon/http/exchange.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "boost/asio/write.hpp"
#include "boost/beast/http.hpp"
#include "daemon/http/http_status.h"
#include "daemon/http/socket_stream.h"

namespace octo {

namespace http = boost::beast::http;

namespace {
constexpr char kServerName[] = "octod";

// Access-Control-Allow-Origin for an admitted origin (cors.h).
template <typename Response>
void SetCorsHeaders(Response& response, const std::string& origin) {
  if (origin.empty()) return;
  response.set(http::field::access_control_allow_origin, origin);
  response.set(http::field::vary, "Origin");
}

// A header list as a browser sends it in Access-Control-Request-Headers:
// names, commas and spaces only (anything else is not echoed).
bool IsHeaderList(absl::string_view headers) {
  return headers.size() <= 1024 && std::all_of(headers.begin(), headers.end(), [](char c) {
           return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == ',' || c == ' ';
         });
}

}  // namespace

HttpExchange::HttpExchange(SocketStream& stream, const HttpRequest& request, unsigned version, bool keep_alive)
    : stream_(stream), request_(request), version_(version), keep_alive_(keep_alive) {}

void HttpExchange::ReplyText(int http_code, absl::string_view content_type, std::string body) {
  if (responded_) return;
  responded_ = true;
  Replied(http_code);
  http::response<http::string_body> response(static_cast<http::status>(http_code), version_);
  response.set(http::field::server, kServerName);
  response.set(http::field::content_type, std::string(content_type));
  SetCorsHeaders(response, request_.allowed_origin);
  // 429 is load octod sheds (the KV budget full of other sessions, its
  // session limit reached), 503 a model it cannot load beside the models in
  // use (or a stop): the client may try again shortly.
  if (http_code == 429 || http_code == 503) response.set(http::field::retry_after, "1");
  response.keep_alive(keep_alive_);
  response.body() = std::move(body);
  response.prepare_payload();
  boost::system::error_code ec;
  if (request_.method == "HEAD") {
    http::response_serializer<http::string_body> serializer(response);
    http::write_header(stream_, serializer, ec);
  } else {
    http::write(stream_, response, ec);
  }
  if (ec) broken_ = true;
}

void HttpExchange::Replied(int status) {
  status_ = status;
  if (on_reply_) on_reply_(status);
}

void HttpExchange::ReplyPreflight(absl::string_view headers) {
  if (responded_) return;
  responded_ = true;
  Replied(204);
  http::response<http::empty_body> response(http::status::no_content, version_);
  response.set(http::field::server, kServerName);
  SetCorsHeaders(response, request_.allowed_origin);
  response.set(http::field::access_control_allow_methods, "GET, POST, DELETE, HEAD, OPTIONS");
  response.set(http::field::access_control_allow_headers,
               IsHeaderList(headers) && !headers.empty() ? std::string(headers) : "Authorization, Content-Type");
  response.set(http::field::access_control_max_age, "86400");
  response.keep_alive(keep_alive_);
  boost::system::error_code ec;
  http::write(stream_, response, ec);
  if (ec) broken_ = true;
}

void HttpExchange::ReplyJson(int http_code, const nlohmann::json& body) {
  ReplyText(http_code, "application/json", JsonText(body));
}

void HttpExchange::ReplyError(const absl::Status& status, int http_code) {
  ReplyJson(http_code != 0 ? http_code : HttpCodeFor(status.code()), ErrorBody(request_.path, status));
}

bool HttpExchange::StartStream(absl::string_view content_type) {
  if (responded_) return false;
  responded_ = true;
  Replied(200);
  streaming_ = true;
  http::response<http::empty_body> response(http::status::ok, version_);
  response.set(http::field::server, kServerName);
  response.set(http::field::content_type, std::string(content_type));
  response.set(http::field::cache_control, "no-cache");
  SetCorsHeaders(response, request_.allowed_origin);
  if (version_ >= 11) {
    response.chunked(true);
  } else {
    keep_alive_ = false;  // HTTP/1.0 has no chunks: the body ends when the connection does
  }
  response.keep_alive(keep_alive_);
  http::response_serializer<http::empty_body> serializer(response);
  boost::system::error_code ec;
  http::write_header(stream_, serializer, ec);
  if (ec) broken_ = true;
  return !broken_;
}

bool HttpExchange::Send(absl::string_view data) {
  if (!streaming_ || broken_ || data.empty()) return !broken_ && streaming_;
  boost::system::error_code ec;
  const boost::asio::const_buffer bytes(data.data(), data.size());
  if (version_ >= 11) {
    boost::asio::write(stream_, http::make_chunk(bytes), ec);
  } else {
    boost::asio::write(stream_, bytes, ec);
  }
  if (ec) broken_ = true;
  return !broken_;
}

void HttpExchange::EndStream() {
  if (!streaming_ || broken_) return;
  streaming_ = false;
  if (version_ < 11) return;
  boost::system::error_code ec;
  boost::asio::write(stream_, http::make_chunk_last(), ec);
  if (ec) broken_ = true;
}

bool HttpExchange::ClientGone() const { return broken_ || stream_.PeerGone(); }

}  // namespace octo
