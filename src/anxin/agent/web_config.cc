#include "anxin/agent/web_config.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <array>
#include <filesystem>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "anxin/base/config.h"

namespace anxin::agent {
namespace {

namespace fs = std::filesystem;

// A path from the file, made absolute against the file's directory.
Result<std::string> FilePath(const ConfigNode& parent, std::string_view key,
                             const fs::path& base_dir) {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode node, parent.Child(key));
  ANXIN_ASSIGN_OR_RETURN(std::string text, node.As<std::string>());
  if (text.empty())
    return std::unexpected(node.MakeError("expected a file path, got an empty string"));
  fs::path p(text);
  if (p.is_relative()) p = base_dir / p;
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) {
    return std::unexpected(node.MakeError("no such file: " + p.string()));
  }
  return p.string();
}

bool IsBcrypt(std::string_view hash) {
  return hash.size() == 60 &&
         (hash.starts_with("$2a$") || hash.starts_with("$2b$") || hash.starts_with("$2y$"));
}

std::optional<std::string> DecodeBase64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0 || text.size() > 4096) return std::nullopt;
  std::string out(text.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  size_t pad = 0;
  if (text.ends_with("==")) {
    pad = 2;
  } else if (text.ends_with("=")) {
    pad = 1;
  }
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

using Digest = std::array<unsigned char, SHA256_DIGEST_LENGTH>;

Digest CacheKey(std::string_view user, std::string_view hash, std::string_view password) {
  std::string material;
  material.reserve(user.size() + hash.size() + password.size() + 2);
  material.append(user).push_back('\0');
  material.append(hash).push_back('\0');
  material.append(password);
  Digest d{};
  SHA256(reinterpret_cast<const unsigned char*>(material.data()), material.size(), d.data());
  OPENSSL_cleanse(material.data(), material.size());
  return d;
}

HttpResponse Unauthorized() {
  HttpResponse r = HttpResponse::Text(401, "Unauthorized\n");
  r.headers.emplace_back("WWW-Authenticate", "Basic realm=\"anxin agent\", charset=\"UTF-8\"");
  return r;
}

}  // namespace

bool CheckPassword(std::string_view password, const std::string& hash) {
  if (!IsBcrypt(hash)) return false;
  crypt_data data{};
  std::string pw(password);
  const char* out = crypt_r(pw.c_str(), hash.c_str(), &data);
  OPENSSL_cleanse(pw.data(), pw.size());
  if (out == nullptr || out[0] == '*') return false;
  std::string_view computed(out);
  return computed.size() == hash.size() &&
         CRYPTO_memcmp(computed.data(), hash.data(), hash.size()) == 0;
}

Result<std::string> HashPassword(std::string_view password, int cost) {
  if (cost < 4 || cost > 31) {
    return InvalidArgument("bcrypt cost " + std::to_string(cost) + " is out of range [4, 31]");
  }
  if (password.empty()) return InvalidArgument("the password is empty");
  if (password.size() > 72) {
    return InvalidArgument("bcrypt uses at most 72 bytes of a password; this one has " +
                           std::to_string(password.size()));
  }
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", static_cast<unsigned long>(cost), nullptr, 0, salt, sizeof(salt)) ==
      nullptr) {
    return Internal("libcrypt cannot make a bcrypt salt (crypt_gensalt_rn failed)");
  }
  crypt_data data{};
  std::string pw(password);
  const char* out = crypt_r(pw.c_str(), salt, &data);
  OPENSSL_cleanse(pw.data(), pw.size());
  if (out == nullptr || out[0] == '*') return Internal("libcrypt's bcrypt failed");
  return std::string(out);
}

Result<WebConfig> LoadWebConfig(const std::string& path) {
  ANXIN_ASSIGN_OR_RETURN(ConfigNode root, ConfigNode::LoadFile(path));
  ANXIN_TRY(root.CheckKeys({"tls_server_config", "basic_auth_users", "http_server_config"}));
  fs::path base_dir = fs::path(path).parent_path();
  WebConfig config;
  if (auto tls = root.Find("tls_server_config"); tls && !tls->IsNull()) {
    ANXIN_TRY(tls->CheckKeys(
        {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version"}));
    HttpTlsOptions options;
    ANXIN_ASSIGN_OR_RETURN(options.cert_file, FilePath(*tls, "cert_file", base_dir));
    ANXIN_ASSIGN_OR_RETURN(options.key_file, FilePath(*tls, "key_file", base_dir));
    ANXIN_ASSIGN_OR_RETURN(std::string auth,
                           tls->Get<std::string>("client_auth_type", "NoClientCert"));
    if (auth == "RequireAndVerifyClientCert") {
      ANXIN_ASSIGN_OR_RETURN(options.client_ca_file, FilePath(*tls, "client_ca_file", base_dir));
    } else if (auth != "NoClientCert") {
      return std::unexpected(
          tls->Find("client_auth_type")
              ->MakeError("client_auth_type '" + auth +
                          "' is not supported (NoClientCert or RequireAndVerifyClientCert)"));
    } else if (tls->Has("client_ca_file")) {
      return std::unexpected(
          tls->Find("client_ca_file")
              ->MakeError(
                  "client_ca_file is set but client_auth_type is NoClientCert; set "
                  "client_auth_type: RequireAndVerifyClientCert to check client certificates"));
    }
    ANXIN_ASSIGN_OR_RETURN(std::string min_version, tls->Get<std::string>("min_version", "TLS12"));
    if (min_version == "TLS13") {
      options.tls13_only = true;
    } else if (min_version != "TLS12") {
      return std::unexpected(
          tls->Find("min_version")
              ->MakeError("min_version '" + min_version + "' is not supported (TLS12 or TLS13)"));
    }
    config.tls = std::move(options);
  }
  if (auto users = root.Find("basic_auth_users"); users && !users->IsNull()) {
    ANXIN_ASSIGN_OR_RETURN(auto entries, users->Entries());
    for (auto& [user, node] : entries) {
      ANXIN_ASSIGN_OR_RETURN(std::string hash, node.As<std::string>());
      if (!IsBcrypt(hash)) {
        return std::unexpected(
            node.MakeError("the password of '" + user +
                           "' must be a bcrypt hash ($2b$..., 60 characters); make one with "
                           "`anxin agent --hash-password`"));
      }
      if (user.find(':') != std::string::npos) {
        return std::unexpected(
            node.MakeError("user name '" + user + "' contains ':', which basic auth cannot carry"));
      }
      config.users.emplace(user, std::move(hash));
    }
  }
  if (auto http = root.Find("http_server_config"); http && !http->IsNull()) {
    // The toolkit's http2 and headers options have no counterpart here;
    // refuse them rather than ignore them.
    ANXIN_TRY(http->CheckKeys(std::vector<std::string_view>{}));
  }
  return config;
}

HttpGuard MakeBasicAuthGuard(std::map<std::string, std::string> users) {
  if (users.empty()) return {};
  struct State {
    std::map<std::string, std::string> users;
    std::mutex mu;
    std::set<Digest> verified;  // bounded: one entry per distinct good password
    std::string decoy;          // checked for unknown users
  };
  auto state = std::make_shared<State>();
  state->users = std::move(users);
  state->decoy = state->users.begin()->second;
  return [state](const HttpRequest& req) -> std::optional<HttpResponse> {
    std::optional<std::string> header = req.Header("Authorization");
    if (!header || !header->starts_with("Basic ")) return Unauthorized();
    std::optional<std::string> decoded = DecodeBase64(std::string_view(*header).substr(6));
    if (!decoded) return Unauthorized();
    size_t colon = decoded->find(':');
    if (colon == std::string::npos) return Unauthorized();
    std::string user = decoded->substr(0, colon);
    std::string_view password = std::string_view(*decoded).substr(colon + 1);
    auto it = state->users.find(user);
    if (it == state->users.end()) {
      // Spend the bcrypt time anyway, so a missing user is not told apart.
      (void)CheckPassword(password, state->decoy);
      OPENSSL_cleanse(decoded->data(), decoded->size());
      return Unauthorized();
    }
    Digest key = CacheKey(user, it->second, password);
    {
      std::lock_guard lock(state->mu);
      if (state->verified.contains(key)) {
        OPENSSL_cleanse(decoded->data(), decoded->size());
        return std::nullopt;
      }
    }
    bool ok = CheckPassword(password, it->second);
    OPENSSL_cleanse(decoded->data(), decoded->size());
    if (!ok) return Unauthorized();
    std::lock_guard lock(state->mu);
    if (state->verified.size() >= 1024) state->verified.clear();
    state->verified.insert(key);
    return std::nullopt;
  };
}

}  // namespace anxin::agent
