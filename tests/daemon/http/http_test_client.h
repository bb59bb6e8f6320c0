// A plain HTTP/1.1 client for the HTTP API tests: whole requests through
// Boost.Beast (chunked bodies decoded), and a raw connection for tests that
// must stop reading half way (a client that goes away mid-stream).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace octo::testing {

struct HttpReply {
  int status = 0;  // 0: no response (the connection failed or closed)
  std::string content_type;
  std::string retry_after;  // the Retry-After header, "" when absent
  std::map<std::string, std::string> headers;  // every header, by lowercase name
  std::string body;
  nlohmann::json Json() const;  // the body parsed; null when it is not JSON
  // Server-sent events: the text after "data: " of each event, in order.
  std::vector<std::string> Events() const;
  // NDJSON: each line parsed.
  std::vector<nlohmann::json> Lines() const;
};

// One request on a fresh connection to 127.0.0.1:port.
HttpReply Request(int port, const std::string& method, const std::string& path, const std::string& body = "",
                  const std::map<std::string, std::string>& headers = {});
inline HttpReply Post(int port, const std::string& path, const nlohmann::json& body,
                      const std::map<std::string, std::string>& headers = {}) {
  return Request(port, "POST", path, body.dump(), headers);
}
inline HttpReply Get(int port, const std::string& path, const std::map<std::string, std::string>& headers = {}) {
  return Request(port, "GET", path, "", headers);
}

// A connection driven by hand: raw bytes out, raw bytes in.
class RawConnection {
 public:
  explicit RawConnection(int port);
  ~RawConnection();  // closes
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool Send(const std::string& bytes);
  // Reads until `text` has arrived (true) or 5 s pass / the peer closes (false).
  bool ReadUntil(const std::string& text);
  // Reads until the server closes the connection (or 5 s pass).
  std::string ReadToEnd();
  const std::string& received() const { return received_; }
  void Close();

 private:
  int fd_ = -1;
  std::string received_;
};

// A POST request's bytes, as a raw client would send them.
std::string RawPost(const std::string& path, const std::string& body, bool keep_alive = true);

}  // namespace octo::testing
