#include "daemon/http/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "absl/strings/str_cat.h"

namespace octo {

std::string TlsErrors() {
  std::string errors;
  while (const unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof(text));
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", text);
  }
  return errors.empty() ? "unknown error" : errors;
}

absl::StatusOr<std::shared_ptr<TlsContext>> TlsContext::Create(const TlsFiles& files) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError(absl::StrCat("TLS: ", TlsErrors()));
  std::shared_ptr<TlsContext> context(new TlsContext(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert.c_str()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("tls-cert: cannot use ", files.cert, ": ", TlsErrors()));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("tls-key: cannot use ", files.key, ": ", TlsErrors()));
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls-key: ", files.key, " is not the key of ", files.cert, ": ", TlsErrors()));
  }
  if (!files.client_ca.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, files.client_ca.c_str(), nullptr) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("tls-client-ca: cannot use ", files.client_ca, ": ", TlsErrors()));
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return context;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

}  // namespace octo
