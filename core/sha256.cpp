// Implements: core/sha256.h.
#include "core/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <vector>

#include "core/errors.h"

namespace aobench {

Sha256::Sha256(std::string what) : what_(std::move(what)), ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) != 1) fail("cannot start");
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::update(const void* p, size_t n) {
  if (n > 0 && EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), p, n) != 1) fail("cannot update");
}

std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len) != 1) fail("cannot finish");
  std::string out;
  for (unsigned int i = 0; i < len; ++i) out += {"0123456789abcdef"[md[i] >> 4], "0123456789abcdef"[md[i] & 15]};
  return out;
}

void Sha256::fail(const char* step) const {
  throw Error(std::string("OpenSSL ") + step + " a SHA-256 digest of " + what_,
              "the OpenSSL library (libcrypto) refused SHA-256; is it a FIPS-only build?");
}

std::string sha256_hex(const void* p, size_t n, const std::string& what) {
  Sha256 h(what);
  h.update(p, n);
  return h.hex();
}

std::string sha256_file_hex(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), path);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  Sha256 h("'" + path + "'");
  std::vector<char> buf(size_t(4) << 20);  // few system calls per GB, small beside the files hashed
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n == 0) return h.hex();
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), path);
    }
    h.update(buf.data(), size_t(n));
  }
}

}  // namespace aobench
