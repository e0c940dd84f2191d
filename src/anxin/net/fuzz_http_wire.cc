// libFuzzer target: the HTTP/1.1 framing the simulator and the gate read from
// the network (request heads, response heads, chunked bodies).
#include <cstddef>
#include <cstdint>
#include <string>

#include "anxin/net/http_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  anxin::net::RequestHead req;
  size_t used = 0;
  if (anxin::net::ParseRequestHead(in, 4096, &req, &used) == anxin::net::WireStatus::kOk &&
      used > in.size()) {
    __builtin_trap();
  }
  anxin::net::ResponseHead resp;
  if (anxin::net::ParseResponseHead(in, 4096, &resp, &used) == anxin::net::WireStatus::kOk) {
    if (used > in.size()) __builtin_trap();
    // The body after the head, as a chunked body fed in two pieces.
    const std::string_view body = in.substr(used);
    anxin::net::ChunkedDecoder dec;
    std::string payload;
    size_t consumed = 0;
    const size_t half = body.size() / 2;
    if (dec.Feed(body.substr(0, half), &consumed, &payload) == anxin::net::WireStatus::kOk &&
        !dec.done()) {
      if (consumed != half) __builtin_trap();
      dec.Feed(body.substr(half), &consumed, &payload);
    }
    if (payload.size() != dec.payload_bytes()) __builtin_trap();
  }
  return 0;
}
