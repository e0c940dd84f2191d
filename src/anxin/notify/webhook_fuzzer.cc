// libFuzzer target: the webhook parser must turn any bytes into a payload or
// an error, never a crash; and what it accepts must render for every kind of
// receiver within the size a bot takes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "anxin/notify/alert.h"
#include "anxin/notify/render.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace anxin::notify;
  ParseLimits limits;
  limits.max_bytes = 64 << 10;
  limits.max_alerts = 64;
  auto n = ParseWebhook(std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (!n) {
    if (n.error().message().empty()) std::abort();
    return 0;
  }
  if (n->alerts.empty() || n->alerts.size() > limits.max_alerts) std::abort();
  RenderOptions options;
  Rendered card = RenderBot(n->alerts, Templates{}, true, options);
  if (card.body.size() > 20 * 1024 || card.fallback.size() > 20 * 1024) std::abort();
  if (card.shown + card.folded != n->alerts.size() || card.shown == 0) std::abort();
  (void)RenderJson(n->alerts, "r", n->group_key, options);
  return 0;
}
