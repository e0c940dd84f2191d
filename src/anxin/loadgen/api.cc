#include "anxin/loadgen/api.h"

#include <fmt/format.h>

namespace anxin::loadgen {

using nlohmann::json;

Result<Api> ParseApi(std::string_view name) {
  if (name == "completions") return Api::kCompletions;
  if (name == "chat") return Api::kChat;
  if (name == "triton") return Api::kTriton;
  return InvalidArgument(fmt::format("unknown API '{}': use completions, chat or triton", name));
}

std::string_view ApiName(Api api) {
  switch (api) {
    case Api::kCompletions:
      return "completions";
    case Api::kChat:
      return "chat";
    case Api::kTriton:
      return "triton";
  }
  return "?";
}

std::string DefaultPath(const RequestSpec& spec) {
  switch (spec.api) {
    case Api::kCompletions:
      return "/v1/completions";
    case Api::kChat:
      return "/v1/chat/completions";
    case Api::kTriton:
      return "/v2/models/" + (spec.model.empty() ? std::string("ensemble") : spec.model) +
             (spec.stream ? "/generate_stream" : "/generate");
  }
  return "/";
}

std::string BuildBody(const RequestSpec& spec, std::string_view prompt, int64_t max_tokens) {
  json body;
  switch (spec.api) {
    case Api::kCompletions:
    case Api::kChat:
      if (!spec.model.empty()) body["model"] = spec.model;
      if (spec.api == Api::kCompletions) {
        body["prompt"] = prompt;
      } else {
        body["messages"] = json::array({{{"role", "user"}, {"content", prompt}}});
      }
      body["max_tokens"] = max_tokens;
      body["stream"] = spec.stream;
      if (spec.stream) body["stream_options"] = {{"include_usage", true}};
      if (spec.ignore_eos) body["ignore_eos"] = true;
      break;
    case Api::kTriton:
      // The TensorRT-LLM ensemble's inputs; a vLLM-backed model takes its
      // sampling parameters under "parameters" (--extra-body).
      body["text_input"] = prompt;
      body["max_tokens"] = max_tokens;
      body["stream"] = spec.stream;
      break;
  }
  if (spec.extra_body.is_object()) body.merge_patch(spec.extra_body);
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

void ReadUsage(const json& doc, Chunk& c) {
  auto u = doc.find("usage");
  if (u == doc.end() || !u->is_object()) return;
  auto p = u->find("prompt_tokens");
  if (p != u->end() && p->is_number_integer()) c.prompt_tokens = p->get<int64_t>();
  auto o = u->find("completion_tokens");
  if (o != u->end() && o->is_number_integer()) c.completion_tokens = o->get<int64_t>();
}

void AddText(const json& v, Chunk& c, bool keep_text) {
  if (!v.is_string()) return;
  const auto& s = v.get_ref<const std::string&>();
  c.text_bytes += s.size();
  if (keep_text) c.text += s;
}

std::string ErrorMessage(const json& e) {
  if (e.is_string()) return e.get<std::string>();
  if (e.is_object()) {
    auto m = e.find("message");
    if (m != e.end() && m->is_string()) return m->get<std::string>();
  }
  return e.dump();
}

}  // namespace

Chunk ParseChunk(Api api, std::string_view data, bool keep_text) {
  if (data == "[DONE]") {
    Chunk c;
    c.kind = Chunk::kDone;
    return c;
  }
  if (auto fast = internal::FastParseChunk(api, data, keep_text)) return *std::move(fast);
  return internal::FullParseChunk(api, data, keep_text);
}

namespace internal {

Chunk FullParseChunk(Api api, std::string_view data, bool keep_text) {
  Chunk c;
  if (data == "[DONE]") {
    c.kind = Chunk::kDone;
    return c;
  }
  json doc = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    c.kind = Chunk::kMalformed;
    c.message = fmt::format("event is not a JSON object: '{}'",
                            data.substr(0, std::min<size_t>(data.size(), 80)));
    return c;
  }
  if (auto e = doc.find("error"); e != doc.end() && !e->is_null()) {
    c.kind = Chunk::kError;
    c.message = ErrorMessage(*e);
    return c;
  }
  if (auto o = doc.find("object"); o != doc.end() && o->is_string() && *o == "error") {
    c.kind = Chunk::kError;
    auto m = doc.find("message");
    c.message = m != doc.end() ? ErrorMessage(*m) : doc.dump();
    return c;
  }
  if (api == Api::kTriton) {
    auto t = doc.find("text_output");
    if (t == doc.end()) {
      c.kind = Chunk::kMalformed;
      c.message = "Triton response without text_output";
      return c;
    }
    AddText(*t, c, keep_text);
    return c;
  }
  ReadUsage(doc, c);
  auto choices = doc.find("choices");
  if (choices == doc.end() || !choices->is_array()) {
    if (c.completion_tokens < 0) {
      c.kind = Chunk::kMalformed;
      c.message = "chunk has neither choices nor usage";
    }
    return c;
  }
  for (const json& choice : *choices) {
    if (!choice.is_object()) continue;
    if (api == Api::kCompletions) {
      if (auto t = choice.find("text"); t != choice.end()) AddText(*t, c, keep_text);
      continue;
    }
    // Chat: streamed deltas, or a whole message when not streaming.
    for (const char* holder : {"delta", "message"}) {
      auto d = choice.find(holder);
      if (d == choice.end() || !d->is_object()) continue;
      for (const char* field : {"content", "reasoning_content"}) {
        if (auto t = d->find(field); t != d->end()) AddText(*t, c, keep_text);
      }
    }
  }
  return c;
}

}  // namespace internal
}  // namespace anxin::loadgen
