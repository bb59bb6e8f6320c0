// A TLS server context for the HTTP API (OpenSSL): the certificate chain
// and key octod presents and, for mutual TLS, the CA a client's certificate
// must chain to. SocketStream runs each connection's handshake and records
// through it. (The gRPC listener takes the same files through gRPC's own
// SSL credentials; octod_main.cc.)
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace octo {

struct TlsFiles {
  std::string cert;       // PEM: the server's certificate (chain)
  std::string key;        // PEM: its private key
  std::string client_ca;  // PEM: clients must present a certificate it signed; empty: no client certificates
};

class TlsContext {
 public:
  // INVALID_ARGUMENT naming the file and OpenSSL's reason when a file does
  // not load or the key does not match the certificate.
  static absl::StatusOr<std::shared_ptr<TlsContext>> Create(const TlsFiles& files);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* get() const { return ctx_; }

 private:
  explicit TlsContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

// OpenSSL's reasons for the last failure on this thread, "; "-joined
// (the error queue is emptied).
std::string TlsErrors();

}  // namespace octo
