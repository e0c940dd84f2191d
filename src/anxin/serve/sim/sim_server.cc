#include "anxin/serve/sim/sim_server.h"

#include <fmt/format.h>

#include <chrono>
#include <map>
#include <thread>

#include "anxin/net/prom_text.h"
#include "anxin/serve/sim/sim_text.h"

namespace anxin::serve::sim {
namespace {

using json = nlohmann::json;
using Clock = net::EventLoop::Clock;

std::string ErrorBody(std::string_view message, std::string_view type) {
  json j;
  j["error"] = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  return j.dump();
}

// A field of the request body, or a message naming it.
template <typename T>
Result<T> Field(const json& body, const char* name, T fallback) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return fallback;
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return InvalidArgument(fmt::format("'{}' must be true or false", name));
  } else if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer())
      return InvalidArgument(fmt::format("'{}' must be an integer", name));
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!it->is_number()) return InvalidArgument(fmt::format("'{}' must be a number", name));
  }
  return it->get<T>();
}

struct Parsed {
  EngineRequest engine;
  bool stream = false, include_usage = false;
  std::string model;
};

Result<Parsed> ParseBody(const std::string& text, bool chat, const SimServerOptions& o) {
  json body = json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return InvalidArgument("the request body is not a JSON object");
  }
  Parsed p;
  ANXIN_ASSIGN_OR_RETURN(p.model, Field<std::string>(body, "model", o.model_name));
  ANXIN_ASSIGN_OR_RETURN(p.stream, Field<bool>(body, "stream", false));
  if (auto so = body.find("stream_options"); so != body.end() && so->is_object()) {
    ANXIN_ASSIGN_OR_RETURN(p.include_usage, Field<bool>(*so, "include_usage", false));
  }
  ANXIN_ASSIGN_OR_RETURN(int n, Field<int>(body, "n", 1));
  if (n != 1) return InvalidArgument("'n' must be 1: the simulator makes one choice a request");
  int max_tokens = chat ? o.default_chat_max_tokens : o.default_max_tokens;
  if (chat) {
    ANXIN_ASSIGN_OR_RETURN(max_tokens, Field<int>(body, "max_completion_tokens", max_tokens));
  }
  ANXIN_ASSIGN_OR_RETURN(p.engine.max_tokens, Field<int>(body, "max_tokens", max_tokens));
  ANXIN_ASSIGN_OR_RETURN(p.engine.sampling.temperature, Field<float>(body, "temperature", 1.0f));
  ANXIN_ASSIGN_OR_RETURN(p.engine.sampling.top_p, Field<float>(body, "top_p", 1.0f));
  ANXIN_ASSIGN_OR_RETURN(p.engine.sampling.top_k, Field<int>(body, "top_k", 0));
  ANXIN_ASSIGN_OR_RETURN(int64_t seed, Field<int64_t>(body, "seed", 0));
  p.engine.seed = static_cast<uint64_t>(seed);
  if (chat) {
    auto m = body.find("messages");
    if (m == body.end() || !m->is_array() || m->empty()) {
      return InvalidArgument("'messages' must be a non-empty list of {role, content}");
    }
    std::string text;
    for (const json& msg : *m) {
      if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string()) {
        return InvalidArgument("each message needs a 'role' string");
      }
      text += msg["role"].get<std::string>() + ": ";
      const json& c = msg.contains("content") ? msg["content"] : json();
      if (c.is_string()) {
        text += c.get<std::string>();
      } else if (c.is_array()) {
        for (const json& part : c) {
          if (part.is_object() && part.contains("text") && part["text"].is_string()) {
            text += part["text"].get<std::string>();
          }
        }
      } else if (!c.is_null()) {
        return InvalidArgument("a message's 'content' must be a string or a list of parts");
      }
      text += "\n";
    }
    text += "assistant:";
    p.engine.prompt = SimTokenize(text);
  } else {
    auto pr = body.find("prompt");
    if (pr == body.end()) return InvalidArgument("'prompt' is required");
    if (pr->is_string()) {
      p.engine.prompt = SimTokenize(pr->get<std::string>());
    } else if (pr->is_array() && !pr->empty() &&
               std::all_of(pr->begin(), pr->end(),
                           [](const json& x) { return x.is_number_integer(); })) {
      for (const json& x : *pr) p.engine.prompt.push_back(x.get<int32_t>());
    } else if (pr->is_array() && pr->size() == 1 && (*pr)[0].is_string()) {
      p.engine.prompt = SimTokenize((*pr)[0].get<std::string>());
    } else {
      return InvalidArgument(
          "'prompt' must be a string, a list of one string, or a list of token ids (batched "
          "prompts are not served)");
    }
  }
  return p;
}

}  // namespace

json SimSnapshot::ToJson() const {
  const EngineStats& e = engine;
  return {{"submitted", e.submitted},
          {"completed", e.completed},
          {"cancelled", e.cancelled},
          {"refused_queue_full", e.refused_queue_full},
          {"refused_invalid", e.refused_invalid},
          {"running", e.running},
          {"waiting", e.waiting},
          {"max_running", e.max_running},
          {"preemptions", e.preemptions},
          {"steps", e.steps},
          {"prompt_tokens", e.prompt_tokens},
          {"generated_tokens", e.generated_tokens},
          {"prefill_tokens", e.prefill_tokens},
          {"prefix_cached_tokens", e.prefix_cached_tokens},
          {"recomputed_tokens", e.recomputed_tokens},
          {"simulated_seconds", e.simulated_seconds},
          {"kv_blocks_total", e.blocks.total_blocks},
          {"kv_blocks_used", e.blocks.used_blocks},
          {"kv_blocks_cached", e.blocks.cached_blocks},
          {"kv_blocks_free", e.blocks.free_blocks},
          {"kv_internal_fragmentation", e.blocks.internal_fragmentation},
          {"kv_evictions", e.blocks.evictions},
          {"responses_ok", responses_ok},
          {"responses_error", responses_error},
          {"streams_open", streams_open},
          {"client_disconnects", client_disconnects},
          {"connections_open", http.open},
          {"connections_accepted", http.accepted},
          {"dropped_slow_readers", http.dropped_slow_readers},
          {"max_step_lag_seconds", max_step_lag_seconds}};
}

struct SimServer::Impl {
  explicit Impl(SimServerOptions o)
      : options(std::move(o)), server(loop, options.http), engine(options.engine) {}

  struct Ctx {
    net::ConnId conn = 0;
    bool chat = false, stream = false, include_usage = false;
    std::string id, model, text;
    int64_t created = 0;
    int prompt_tokens = 0, completion_tokens = 0;
    Clock::time_point received{};
    std::string route;
  };
  struct RouteStats {
    std::map<int, uint64_t> codes;
    net::Histogram ttft{&net::LatencyBuckets()}, e2e{&net::LatencyBuckets()};
  };

  SimServerOptions options;
  net::EventLoop loop;
  net::StreamServer server;
  Engine engine;
  std::thread thread;
  std::unordered_map<RequestId, Ctx> ctxs;
  std::unordered_map<net::ConnId, RequestId> by_conn;
  std::map<std::string, RouteStats> routes;
  uint64_t ok = 0, errors = 0, disconnects = 0, seq = 0;
  bool stepping = false;
  Clock::time_point next_start{};
  double max_lag = 0;

  void Reply(net::ConnId c, const std::string& route, int status, std::string_view type,
             std::string_view body, std::vector<net::Header> extra = {}) {
    ++routes[route].codes[status];
    (status < 400 ? ok : errors) += 1;
    server.Respond(c, status, type, body, extra);
  }

  void OnRequest(net::ServerRequest& r) {
    const std::string& path = r.head.path;
    const bool get = r.head.method == "GET" || r.head.method == "HEAD";
    const bool chat = path == "/v1/chat/completions";
    if (chat || path == "/v1/completions") {
      if (r.head.method != "POST") {
        Reply(r.conn, path, 405, "application/json", ErrorBody("use POST", "invalid_request_error"),
              {{"Allow", "POST"}});
        return;
      }
      Generate(r, chat);
      return;
    }
    if (path == "/health" && get) return Reply(r.conn, path, 200, "text/plain", "ok\n");
    if (path == "/metrics" && get) {
      return Reply(r.conn, path, 200, "text/plain; version=0.0.4", Metrics());
    }
    if (path == "/sim/stats" && get) {
      return Reply(r.conn, path, 200, "application/json", Snap().ToJson().dump(2) + "\n");
    }
    if (path == "/v1/models" && get) {
      json j = {{"object", "list"},
                {"data", json::array({{{"id", options.model_name},
                                       {"object", "model"},
                                       {"owned_by", "anxin"},
                                       {"max_model_len", options.engine.max_model_len}}})}};
      return Reply(r.conn, path, 200, "application/json", j.dump());
    }
    Reply(r.conn, "other", 404, "application/json",
          ErrorBody(fmt::format("no route {} {}", r.head.method, path), "not_found_error"));
  }

  void Generate(net::ServerRequest& r, bool chat) {
    const std::string route = r.head.path;
    auto parsed = ParseBody(r.body, chat, options);
    if (!parsed) {
      return Reply(r.conn, route, 400, "application/json",
                   ErrorBody(parsed.error().Describe(), "invalid_request_error"));
    }
    Ctx ctx;
    ctx.conn = r.conn;
    ctx.chat = chat;
    ctx.stream = parsed->stream;
    ctx.include_usage = parsed->include_usage || options.always_usage;
    ctx.model = parsed->model;
    ctx.prompt_tokens = static_cast<int>(parsed->engine.prompt.size());
    ctx.created = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    ctx.id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", ++seq);
    ctx.received = r.received;
    ctx.route = route;
    auto id = engine.Submit(std::move(parsed->engine));
    if (!id) {
      const bool full = id.error().code() == ErrorCode::kResourceExhausted;
      return Reply(
          r.conn, route, full ? 429 : 400, "application/json",
          ErrorBody(id.error().Describe(), full ? "rate_limit_exceeded" : "invalid_request_error"),
          full ? std::vector<net::Header>{{"Retry-After", "1"}} : std::vector<net::Header>{});
    }
    if (ctx.stream) {
      server.BeginStream(r.conn, 200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    }
    by_conn[r.conn] = *id;
    ctxs.emplace(*id, std::move(ctx));
    Kick();
  }

  json Usage(const Ctx& c) const {
    return {{"prompt_tokens", c.prompt_tokens},
            {"completion_tokens", c.completion_tokens},
            {"total_tokens", c.prompt_tokens + c.completion_tokens}};
  }

  std::string Chunk(const Ctx& c, std::string_view text, bool role, const char* finish) const {
    json choice;
    choice["index"] = 0;
    if (c.chat) {
      json delta = json::object();
      if (role) delta["role"] = "assistant";
      delta["content"] = text;
      choice["delta"] = delta;
      choice["logprobs"] = nullptr;
    } else {
      choice["text"] = text;
      choice["logprobs"] = nullptr;
    }
    choice["finish_reason"] = finish ? json(finish) : json(nullptr);
    json j = {{"id", c.id},
              {"object", c.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", c.created},
              {"model", c.model},
              {"choices", json::array({choice})}};
    return "data: " + j.dump() + "\n\n";
  }

  void Deliver(const StepResult& res) {
    const auto now = Clock::now();
    for (const StepOutput& o : res.outputs) {
      auto it = ctxs.find(o.id);
      if (it == ctxs.end()) continue;  // cancelled while the step ran
      Ctx& c = it->second;
      ++c.completion_tokens;
      RouteStats& rs = routes[c.route];
      if (o.first) rs.ttft.Observe(std::chrono::duration<double>(now - c.received).count());
      const std::string_view word = SimWord(o.token);
      if (c.stream) {
        std::string out;
        if (o.first && c.chat) out += Chunk(c, "", true, nullptr);
        out += Chunk(c, word, false, o.finished ? "length" : nullptr);
        if (o.finished) {
          if (c.include_usage) {
            json u = {{"id", c.id},
                      {"object", c.chat ? "chat.completion.chunk" : "text_completion"},
                      {"created", c.created},
                      {"model", c.model},
                      {"choices", json::array()},
                      {"usage", Usage(c)}};
            out += "data: " + u.dump() + "\n\n";
          }
          out += "data: [DONE]\n\n";
        }
        server.StreamChunk(c.conn, out);
        // A client that stopped reading is dropped by the send (OnClose has
        // then cancelled the request and forgotten it).
        if (!ctxs.contains(o.id)) continue;
      } else {
        c.text += word;
      }
      if (o.finished) {
        rs.e2e.Observe(std::chrono::duration<double>(now - c.received).count());
        ++rs.codes[200];
        ++ok;
        // Forget the request before the last write: a write can drop the
        // connection, which must then find nothing to cancel.
        Ctx done = std::move(c);
        by_conn.erase(done.conn);
        ctxs.erase(it);
        if (done.stream) {
          server.EndStream(done.conn);
        } else {
          json choice = {{"index", 0}, {"finish_reason", "length"}, {"logprobs", nullptr}};
          if (done.chat) {
            choice["message"] = {{"role", "assistant"}, {"content", done.text}};
          } else {
            choice["text"] = done.text;
          }
          json j = {{"id", done.id},
                    {"object", done.chat ? "chat.completion" : "text_completion"},
                    {"created", done.created},
                    {"model", done.model},
                    {"choices", json::array({choice})},
                    {"usage", Usage(done)}};
          server.Respond(done.conn, 200, "application/json", j.dump());
        }
      }
    }
  }

  void Kick() {
    if (stepping || !engine.HasWork()) return;
    stepping = true;
    next_start = std::max(next_start, Clock::now());
    RunStep();
  }

  void RunStep() {
    StepResult res = engine.Step();
    if (res.idle) {
      stepping = false;
      return;
    }
    const auto now = Clock::now();
    max_lag = std::max(max_lag, std::chrono::duration<double>(now - next_start).count());
    const auto end =
        next_start + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(res.seconds * options.time_scale));
    loop.RunAt(end, [this, res = std::move(res), end] {
      Deliver(res);
      next_start = std::max(end, Clock::now() - std::chrono::seconds(1));
      RunStep();
    });
  }

  void OnClose(net::ConnId c) {
    auto it = by_conn.find(c);
    if (it == by_conn.end()) return;
    const RequestId id = it->second;
    by_conn.erase(it);
    auto ct = ctxs.find(id);
    if (ct != ctxs.end()) {
      ++routes[ct->second.route].codes[499];  // nginx's "client closed request"
      ctxs.erase(ct);
    }
    ++disconnects;
    engine.Cancel(id);
  }

  SimSnapshot Snap() const {
    SimSnapshot s;
    s.engine = engine.Stats();
    s.http = server.stats();
    s.responses_ok = ok;
    s.responses_error = errors;
    s.client_disconnects = disconnects;
    for (const auto& [id, c] : ctxs) s.streams_open += c.stream ? 1 : 0;
    s.max_step_lag_seconds = max_lag;
    return s;
  }

  std::string Metrics() const {
    const SimSnapshot s = Snap();
    const EngineStats& e = s.engine;
    net::PromText p;
    for (const auto& [route, rs] : routes) {
      for (const auto& [code, n] : rs.codes) {
        p.Counter("anxin_sim_requests_total", "Responses by route and status (499: client gone)",
                  {{"route", route}, {"code", std::to_string(code)}}, n);
      }
    }
    for (const auto& [route, rs] : routes) {
      if (rs.ttft.count()) {
        p.Histogram("anxin_sim_time_to_first_token_seconds", "Wall time to the first token",
                    {{"route", route}}, rs.ttft);
      }
    }
    for (const auto& [route, rs] : routes) {
      if (rs.e2e.count()) {
        p.Histogram("anxin_sim_request_seconds", "Wall time to the last token", {{"route", route}},
                    rs.e2e);
      }
    }
    p.Gauge("anxin_sim_requests_running", "Sequences in the running batch", {}, e.running);
    p.Gauge("anxin_sim_requests_waiting", "Requests queued for admission", {}, e.waiting);
    p.Gauge("anxin_sim_running_max", "Largest batch so far", {}, e.max_running);
    p.Gauge("anxin_sim_running_cap", "The concurrency cap (max_num_seqs)", {},
            options.engine.max_num_seqs);
    p.Counter("anxin_sim_preemptions_total", "Sequences preempted (recompute)", {}, e.preemptions);
    p.Counter("anxin_sim_steps_total", "Scheduler steps", {}, e.steps);
    p.Counter("anxin_sim_simulated_seconds_total", "Simulated device time", {},
              e.simulated_seconds);
    p.Counter("anxin_sim_prompt_tokens_total", "Prompt tokens submitted", {}, e.prompt_tokens);
    p.Counter("anxin_sim_generation_tokens_total", "Tokens generated", {}, e.generated_tokens);
    p.Counter("anxin_sim_prefix_cache_hit_tokens_total", "Prompt tokens found in the prefix cache",
              {}, e.prefix_cached_tokens);
    p.Counter("anxin_sim_recomputed_tokens_total", "Tokens prefilled again after preemption", {},
              e.recomputed_tokens);
    p.Gauge("anxin_sim_kv_blocks", "KV blocks by state", {{"state", "used"}}, e.blocks.used_blocks);
    p.Gauge("anxin_sim_kv_blocks", "KV blocks by state", {{"state", "cached"}},
            e.blocks.cached_blocks);
    p.Gauge("anxin_sim_kv_blocks", "KV blocks by state", {{"state", "free"}}, e.blocks.free_blocks);
    p.Gauge("anxin_sim_kv_usage_ratio", "Share of KV blocks in use", {},
            e.blocks.total_blocks ? double(e.blocks.used_blocks) / e.blocks.total_blocks : 0);
    p.Gauge("anxin_sim_kv_internal_fragmentation_ratio", "Unused slots in used blocks", {},
            e.blocks.internal_fragmentation);
    p.Counter("anxin_sim_kv_evictions_total", "Cached blocks evicted", {}, e.blocks.evictions);
    p.Gauge("anxin_sim_connections_open", "Open HTTP connections", {}, s.http.open);
    p.Counter("anxin_sim_client_disconnects_total", "Requests cancelled by their client leaving",
              {}, s.client_disconnects);
    p.Counter("anxin_sim_dropped_slow_readers_total", "Connections dropped for not reading", {},
              s.http.dropped_slow_readers);
    p.Gauge("anxin_sim_step_lag_seconds_max", "Largest delay of a step behind its simulated time",
            {}, s.max_step_lag_seconds);
    return p.str();
  }
};

SimServer::SimServer(SimServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

SimServer::~SimServer() { Stop(); }

Status SimServer::Start() {
  Impl& m = *impl_;
  if (m.options.engine.num_blocks <= 0) {
    return InvalidArgument("the simulator needs at least one KV block");
  }
  ANXIN_TRY(m.loop.Init());
  m.server.set_on_request([&m](net::ServerRequest& r) { m.OnRequest(r); });
  m.server.set_on_close([&m](net::ConnId c) { m.OnClose(c); });
  ANXIN_TRY(m.server.Listen());
  m.thread = std::thread([&m] { m.loop.Run(); });
  return Ok();
}

void SimServer::Stop() {
  Impl& m = *impl_;
  if (!m.thread.joinable()) return;
  m.loop.Post([&m] { m.server.Shutdown(); });
  m.loop.Stop();
  m.thread.join();
}

int SimServer::port() const { return impl_->server.port(); }

SimSnapshot SimServer::Snapshot() const {
  Impl& m = *impl_;
  if (!m.thread.joinable()) return m.Snap();
  return m.loop.CallAndWait([&m] { return m.Snap(); }, std::chrono::seconds(10))
      .value_or(SimSnapshot{});
}

std::string SimServer::MetricsText() const {
  Impl& m = *impl_;
  return m.loop.CallAndWait([&m] { return m.Metrics(); }, std::chrono::seconds(10)).value_or("");
}

}  // namespace anxin::serve::sim
