// libFuzzer target: the SDK datagram decoder must turn any bytes into a
// valid datagram or an error, never a crash; and what it accepts must encode
// back to the very same bytes (the format has one encoding per message, so
// nothing the decoder let through was silently reinterpreted).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "anxin/monitor/sdk_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace anxin::monitor;
  static SdkDatagram reused;  // the receiver decodes into one object, too
  std::span<const uint8_t> in(data, size);
  auto fresh = DecodeSdkDatagram(in);
  auto status = DecodeSdkDatagram(in, reused);
  if (fresh.has_value() != status.has_value()) std::abort();
  if (!fresh) {
    (void)RejectReasonOf(fresh.error());
    return 0;
  }
  auto again = EncodeSdkDatagram(*fresh);
  if (!again || again->size() != size || !std::equal(again->begin(), again->end(), data))
    std::abort();
  if (reused.events.size() != fresh->events.size() || reused.sender.job != fresh->sender.job)
    std::abort();
  return 0;
}
