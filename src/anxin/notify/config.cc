#include "anxin/notify/config.h"

#include <algorithm>
#include <filesystem>

#include "anxin/base/file.h"
#include "anxin/base/strings.h"

namespace anxin::notify {

namespace {

// A file receiver's path must not be a directory: "" when it is not, else
// what is wrong, checked at start rather than at the first alert.
std::string SinkFileProblem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return "'" + path + "' is a directory: give a file to append alerts to (created if missing)";
  }
  return "";
}

bool ValidLabelName(std::string_view s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (!(c == '_' || std::isalpha(static_cast<unsigned char>(c)) ||
          (i > 0 && std::isdigit(static_cast<unsigned char>(c))))) {
      return false;
    }
  }
  return true;
}

std::string TrimNewlines(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// A secret-bearing value: `key` inline is refused for secrets (it would sit in
// a file people share), `key_file` and `key_env` are read.
Result<std::string> ReadSecret(const ConfigNode& n, std::string_view key, bool allow_inline,
                               const EnvironmentLookup& env, bool& from_secret_source) {
  const std::string file_key = std::string(key) + "_file";
  const std::string env_key = std::string(key) + "_env";
  const int given = n.Has(key) + n.Has(file_key) + n.Has(env_key);
  from_secret_source = false;
  if (given > 1) {
    return std::unexpected(
        n.MakeError("give one of " + std::string(key) + ", " + file_key + ", " + env_key));
  }
  if (n.Has(key)) {
    if (!allow_inline) {
      ANXIN_ASSIGN_OR_RETURN(auto child, n.Child(key));
      return std::unexpected(child.MakeError("a secret is not written in the configuration: use " +
                                             file_key + " (a file holding it) or " + env_key +
                                             " (an environment variable)"));
    }
    return n.Get<std::string>(key);
  }
  from_secret_source = given == 1;
  if (n.Has(file_key)) {
    ANXIN_ASSIGN_OR_RETURN(std::string path, n.Get<std::string>(file_key));
    auto text = ReadFile(path, 64 << 10);
    ANXIN_ASSIGN_OR_RETURN(auto child, n.Child(file_key));
    if (!text) {
      return std::unexpected(
          Error(text.error().code(), child
                                         .MakeError("cannot read " + path + ": " +
                                                    std::string(ErrorCodeName(text.error().code())))
                                         .message()));
    }
    std::string v = TrimNewlines(*text);
    if (v.empty()) return std::unexpected(child.MakeError(path + " is empty"));
    return v;
  }
  if (n.Has(env_key)) {
    ANXIN_ASSIGN_OR_RETURN(std::string var, n.Get<std::string>(env_key));
    auto v = env(var);
    ANXIN_ASSIGN_OR_RETURN(auto child, n.Child(env_key));
    if (!v || v->empty())
      return std::unexpected(child.MakeError("environment variable " + var + " is not set"));
    return TrimNewlines(*v);
  }
  return std::string();
}

Result<std::vector<std::string>> StringList(const ConfigNode& n, std::string_view key) {
  if (!n.Has(key)) return std::vector<std::string>{};
  return n.Get<std::vector<std::string>>(key);
}

}  // namespace

Result<Matcher> ParseMatcher(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument(
        "matcher '" + std::string(text) + "': " + std::string(why) +
        " (expected name=\"value\", name!=\"value\", name=~\"re\" or name!~\"re\")");
  };
  size_t i = 0;
  while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_'))
    ++i;
  Matcher m;
  m.label = std::string(text.substr(0, i));
  if (!ValidLabelName(m.label)) return bad("bad label name");
  std::string_view rest = text.substr(i);
  if (rest.starts_with("=~")) {
    m.op = Matcher::Op::kRegex;
    rest.remove_prefix(2);
  } else if (rest.starts_with("!~")) {
    m.op = Matcher::Op::kNotRegex;
    rest.remove_prefix(2);
  } else if (rest.starts_with("!=")) {
    m.op = Matcher::Op::kNotEqual;
    rest.remove_prefix(2);
  } else if (rest.starts_with("=")) {
    rest.remove_prefix(1);
  } else {
    return bad("no operator");
  }
  if (rest.size() >= 2 && rest.front() == '"' && rest.back() == '"') {
    rest = rest.substr(1, rest.size() - 2);
  }
  m.value = std::string(rest);
  if (m.op == Matcher::Op::kRegex || m.op == Matcher::Op::kNotRegex) {
    try {
      m.regex = std::regex(m.value, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return bad(std::string("bad regular expression: ") + e.what());
    }
  }
  return m;
}

bool Matcher::Matches(const LabelSet& labels) const {
  auto it = labels.find(label);
  const std::string& v = it == labels.end() ? std::string() : it->second;
  switch (op) {
    case Op::kEqual:
      return v == value;
    case Op::kNotEqual:
      return v != value;
    case Op::kRegex:
      return std::regex_match(v, regex);
    case Op::kNotRegex:
      return !std::regex_match(v, regex);
  }
  return false;
}

const ReceiverConfig* NotifyConfig::Find(std::string_view name) const {
  for (const auto& r : receivers) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::vector<size_t> NotifyConfig::Route(const LabelSet& labels) const {
  std::vector<size_t> out;
  auto add = [&](const std::vector<std::string>& names) {
    for (const auto& name : names) {
      for (size_t i = 0; i < receivers.size(); ++i) {
        if (receivers[i].name == name && std::find(out.begin(), out.end(), i) == out.end()) {
          out.push_back(i);
        }
      }
    }
  };
  bool matched = false;
  for (const auto& route : routes) {
    if (std::all_of(route.matchers.begin(), route.matchers.end(),
                    [&](const Matcher& m) { return m.Matches(labels); })) {
      matched = true;
      add(route.receivers);
      if (!route.continue_matching) break;
    }
  }
  if (!matched) add(default_receivers);
  return out;
}

std::string NotifyConfig::Redact(std::string text) const {
  for (const auto& r : receivers) {
    for (const auto& secret : r.redact) {
      if (secret.size() < 4) continue;
      for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
        text.replace(at, secret.size(), "[redacted]");
      }
    }
  }
  return text;
}

Result<NotifyConfig> ParseNotifyConfig(const ConfigNode& s, const EnvironmentLookup& env) {
  NotifyConfig c;
  ANXIN_TRY(s.CheckKeys({"receivers", "routes", "default_receivers", "time_zone", "dashboard_url",
                         "prometheus_url", "spool_max_bytes", "backoff_initial", "backoff_max",
                         "rate_per_second", "rate_per_minute", "send_timeout", "max_payload_bytes",
                         "max_alerts"}));
  ANXIN_ASSIGN_OR_RETURN(c.time_zone, s.Get<std::string>("time_zone", "UTC"));
  ANXIN_ASSIGN_OR_RETURN(c.dashboard_url, s.Get<std::string>("dashboard_url", ""));
  ANXIN_ASSIGN_OR_RETURN(c.prometheus_url, s.Get<std::string>("prometheus_url", ""));
  ANXIN_ASSIGN_OR_RETURN(c.spool_max_bytes, s.GetBytes("spool_max_bytes", c.spool_max_bytes));
  if (c.spool_max_bytes < (64 << 10)) {
    return std::unexpected(s.Child("spool_max_bytes")->MakeError("the spool needs at least 64KiB"));
  }
  ANXIN_ASSIGN_OR_RETURN(c.backoff_initial_s, s.GetSeconds("backoff_initial", c.backoff_initial_s));
  ANXIN_ASSIGN_OR_RETURN(c.backoff_max_s, s.GetSeconds("backoff_max", c.backoff_max_s));
  if (c.backoff_initial_s < 0.001 || c.backoff_max_s < c.backoff_initial_s) {
    return std::unexpected(
        s.MakeError("backoff_initial must be at least 1ms and at most backoff_max"));
  }
  ANXIN_ASSIGN_OR_RETURN(c.rate_per_second, s.GetInRange<int>("rate_per_second", 1, 1000, 5));
  ANXIN_ASSIGN_OR_RETURN(c.rate_per_minute, s.GetInRange<int>("rate_per_minute", 1, 60000, 100));
  ANXIN_ASSIGN_OR_RETURN(c.send_timeout_s, s.GetSeconds("send_timeout", c.send_timeout_s));
  ANXIN_ASSIGN_OR_RETURN(uint64_t max_payload, s.GetBytes("max_payload_bytes", c.limits.max_bytes));
  c.limits.max_bytes = max_payload;
  ANXIN_ASSIGN_OR_RETURN(c.limits.max_alerts,
                         s.GetInRange<uint64_t>("max_alerts", 1, 100000, c.limits.max_alerts));

  ANXIN_ASSIGN_OR_RETURN(auto receivers, s.Child("receivers"));
  ANXIN_ASSIGN_OR_RETURN(auto list, receivers.Elements());
  if (list.empty()) return std::unexpected(receivers.MakeError("at least one receiver is needed"));
  for (const ConfigNode& n : list) {
    ANXIN_TRY(n.CheckKeys({"name", "type", "url", "url_file", "url_env", "secret", "secret_file",
                           "secret_env", "path", "format", "title_template", "alert_template"}));
    ReceiverConfig r;
    ANXIN_ASSIGN_OR_RETURN(r.name, n.Get<std::string>("name"));
    if (r.name.empty() || r.name.size() > 64)
      return std::unexpected(n.MakeError("name: 1 to 64 characters"));
    if (c.Find(r.name))
      return std::unexpected(n.MakeError("receiver '" + r.name + "' is named twice"));
    ANXIN_ASSIGN_OR_RETURN(std::string type, n.Get<std::string>("type"));
    if (type == "feishu") {
      r.type = ReceiverType::kFeishu;
    } else if (type == "lark") {
      r.type = ReceiverType::kLark;
    } else if (type == "webhook") {
      r.type = ReceiverType::kWebhook;
    } else if (type == "file") {
      r.type = ReceiverType::kFile;
    } else {
      return std::unexpected(n.Child("type")->MakeError("unknown receiver type '" + type +
                                                        "' (known: feishu, lark, webhook, file)"));
    }
    const bool bot = r.type == ReceiverType::kFeishu || r.type == ReceiverType::kLark;
    if (r.type == ReceiverType::kFile) {
      ANXIN_ASSIGN_OR_RETURN(r.path, n.Get<std::string>("path"));
      if (std::string problem = SinkFileProblem(r.path); !problem.empty()) {
        return std::unexpected(n.Child("path")->MakeError("receiver '" + r.name + "': " + problem));
      }
    } else {
      bool secret_url = false;
      ANXIN_ASSIGN_OR_RETURN(r.url, ReadSecret(n, "url", true, env, secret_url));
      if (r.url.empty())
        return std::unexpected(
            n.MakeError("receiver '" + r.name + "' needs url, url_file or url_env"));
      if (!r.url.starts_with("http://") && !r.url.starts_with("https://")) {
        return std::unexpected(
            n.MakeError("receiver '" + r.name + "': the URL must start with http:// or https://"));
      }
      // The path of a bot URL is its token: never printed.
      const size_t path_at = r.url.find('/', r.url.find("://") + 3);
      if (path_at != std::string::npos && (bot || secret_url)) {
        const size_t last = r.url.rfind('/');
        if (last + 1 < r.url.size()) r.redact.push_back(r.url.substr(last + 1));
      }
      if (secret_url) r.redact.push_back(r.url);
    }
    if (bot) {
      bool unused = false;
      ANXIN_ASSIGN_OR_RETURN(r.secret, ReadSecret(n, "secret", false, env, unused));
      if (!r.secret.empty()) r.redact.push_back(r.secret);
      ANXIN_ASSIGN_OR_RETURN(std::string format, n.Get<std::string>("format", "card"));
      if (format != "card" && format != "text") {
        return std::unexpected(
            n.Child("format")->MakeError("expected card or text, got '" + format + "'"));
      }
      r.card = format == "card";
    } else if (n.Has("secret") || n.Has("secret_file") || n.Has("secret_env") || n.Has("format")) {
      return std::unexpected(
          n.MakeError("secret and format apply to feishu and lark receivers only"));
    }
    ANXIN_ASSIGN_OR_RETURN(r.templates.title,
                           n.Get<std::string>("title_template", r.templates.title));
    ANXIN_ASSIGN_OR_RETURN(r.templates.alert, n.Get<std::string>("alert_template", ""));
    c.receivers.push_back(std::move(r));
  }
  auto check_names = [&](const ConfigNode& at, const std::vector<std::string>& names) -> Status {
    for (const auto& name : names) {
      if (!c.Find(name)) return std::unexpected(at.MakeError("no receiver named '" + name + "'"));
    }
    return Ok();
  };
  ANXIN_ASSIGN_OR_RETURN(c.default_receivers, StringList(s, "default_receivers"));
  if (s.Has("default_receivers"))
    ANXIN_TRY(check_names(*s.Child("default_receivers"), c.default_receivers));
  if (auto routes = s.Find("routes")) {
    ANXIN_ASSIGN_OR_RETURN(auto rl, routes->Elements());
    for (const ConfigNode& n : rl) {
      ANXIN_TRY(n.CheckKeys({"matchers", "receivers", "continue"}));
      RouteConfig route;
      ANXIN_ASSIGN_OR_RETURN(auto texts, StringList(n, "matchers"));
      for (const auto& t : texts) {
        auto m = ParseMatcher(t);
        if (!m) return std::unexpected(n.Child("matchers")->MakeError(m.error().message()));
        route.matchers.push_back(std::move(*m));
      }
      ANXIN_ASSIGN_OR_RETURN(route.receivers, n.Get<std::vector<std::string>>("receivers"));
      ANXIN_TRY(check_names(*n.Child("receivers"), route.receivers));
      ANXIN_ASSIGN_OR_RETURN(route.continue_matching, n.Get<bool>("continue", false));
      c.routes.push_back(std::move(route));
    }
  }
  if (c.routes.empty() && c.default_receivers.empty()) {
    return std::unexpected(
        s.MakeError("nothing would be delivered: add routes or default_receivers"));
  }
  return c;
}

Result<NotifyConfig> LocalSinkConfig(const LocalSinks& sinks) {
  if (sinks.file.empty() && sinks.webhook.empty()) {
    return InvalidArgument(
        "no sink: give a JSON-lines file (--sink-file) or a webhook URL "
        "(--sink-webhook), or a notify: section in the configuration");
  }
  NotifyConfig c;
  if (!sinks.file.empty()) {
    if (std::string problem = SinkFileProblem(sinks.file); !problem.empty()) {
      return InvalidArgument("--sink-file: " + problem);
    }
    c.receivers.push_back({.name = "file", .type = ReceiverType::kFile, .path = sinks.file});
  }
  if (!sinks.webhook.empty()) {
    if (!sinks.webhook.starts_with("http://") && !sinks.webhook.starts_with("https://")) {
      return InvalidArgument("--sink-webhook: the URL must start with http:// or https://, got '" +
                             sinks.webhook + "'");
    }
    c.receivers.push_back(
        {.name = "webhook", .type = ReceiverType::kWebhook, .url = sinks.webhook});
  }
  for (const auto& r : c.receivers) c.default_receivers.push_back(r.name);
  return c;
}

}  // namespace anxin::notify
