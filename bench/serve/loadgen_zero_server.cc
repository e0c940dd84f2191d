// A streaming server that does no work, for measuring what a load tester
// itself costs: every POST gets an OpenAI-style /v1/completions SSE stream of
// max_tokens chunks (vLLM's chunk layout), the usage chunk and data: [DONE],
// over kept-alive HTTP/1.1 connections, all at once.
//
// It can also pace the stream, to stand in for a model server in examples:
// the first token after --ttft-ms, then one every --token-ms; with --batch B,
// once more than B streams are open each token takes token-ms x open / B (a
// device that has run out of batch slots).
//
//   loadgen_zero_server [--port 0] [--ttft-ms 0] [--token-ms 0] [--batch 0]
// prints "port N" on stdout once listening; runs until SIGTERM or SIGINT and
// then prints "requests N" on stderr. One thread, epoll, non-blocking.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <vector>

namespace {

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string Chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return size + data + "\r\n";
}

// The response for n tokens, one piece per token (the first with the
// headers, the last with the usage chunk, [DONE] and the end of the body).
const std::vector<std::string>& ResponseFor(int n) {
  static std::map<int, std::vector<std::string>> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  std::vector<std::string> pieces;
  for (int i = 0; i < n; ++i) {
    char ev[512];
    std::snprintf(ev, sizeof(ev),
                  "data: {\"id\":\"cmpl-0\",\"object\":\"text_completion\",\"created\":1764547200,"
                  "\"model\":\"zero\",\"choices\":[{\"index\":0,\"text\":\" tok%d\",\"logprobs\":"
                  "null,\"finish_reason\":%s,\"stop_reason\":null}],\"usage\":null}\n\n",
                  i, i + 1 == n ? "\"length\"" : "null");
    pieces.push_back(Chunk(ev));
  }
  pieces[0] =
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
      "transfer-encoding: chunked\r\n\r\n" +
      pieces[0];
  char usage[256];
  std::snprintf(usage, sizeof(usage),
                "data: {\"id\":\"cmpl-0\",\"object\":\"text_completion\",\"created\":1764547200,"
                "\"model\":\"zero\",\"choices\":[],\"usage\":{\"prompt_tokens\":16,"
                "\"total_tokens\":%d,\"completion_tokens\":%d}}\n\n",
                16 + n, n);
  pieces.back() += Chunk(usage) + Chunk("data: [DONE]\n\n") + "0\r\n\r\n";
  return cache.emplace(n, std::move(pieces)).first->second;
}

struct Conn {
  int fd;
  uint64_t id;
  std::string in, out;
  size_t out_off = 0;
  bool streaming = false;
};

int g_ep = -1;
std::vector<std::unique_ptr<Conn>> g_conns;
// A paced stream's next token.
struct Due {
  int64_t due_ms;
  int fd;
  uint64_t id;
  const std::vector<std::string>* pieces;
  size_t next;
  bool operator>(const Due& o) const { return due_ms > o.due_ms; }
};
std::priority_queue<Due, std::vector<Due>, std::greater<>> g_due;
uint64_t g_next_id = 1;
long long g_requests = 0;
int g_ttft_ms = 0, g_token_ms = 0, g_batch = 0;
int64_t g_open_streams = 0;

int64_t TokenGapMs() {
  if (g_batch <= 0 || g_open_streams <= g_batch) return g_token_ms;
  return g_token_ms * g_open_streams / g_batch;
}

void Close(Conn* c) {
  ::close(c->fd);
  g_conns[static_cast<size_t>(c->fd)].reset();
}

// Writes what is queued; false when the connection died.
bool Flush(Conn* c) {
  while (c->out_off < c->out.size()) {
    ssize_t n = ::send(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN) return true;
      if (errno == EINTR) continue;
      return false;
    }
    c->out_off += static_cast<size_t>(n);
  }
  c->out.clear();
  c->out_off = 0;
  return true;
}

void Send(Conn* c, const std::string& data) {
  c->out += data;
  if (!Flush(c)) Close(c);
}

void Serve(Conn* c) {
  while (true) {
    size_t end = c->in.find("\r\n\r\n");
    if (end == std::string::npos) return;
    size_t length = 0;
    for (const char* key : {"Content-Length:", "content-length:"}) {
      size_t at = c->in.find(key);
      if (at != std::string::npos && at < end) {
        length = std::strtoul(c->in.c_str() + at + 15, nullptr, 10);
      }
    }
    if (c->in.size() < end + 4 + length) return;
    int tokens = 16;
    size_t mt = c->in.find("\"max_tokens\":", end);
    if (mt != std::string::npos && mt < end + 4 + length) {
      tokens = std::max(1, std::atoi(c->in.c_str() + mt + 13));
    }
    c->in.erase(0, end + 4 + length);
    ++g_requests;
    const std::vector<std::string>& pieces = ResponseFor(tokens);
    if (g_ttft_ms > 0 || g_token_ms > 0) {
      // One paced stream at a time per connection; the next request waits.
      ++g_open_streams;
      c->streaming = true;
      g_due.push({NowMs() + g_ttft_ms, c->fd, c->id, &pieces, 0});
      return;
    }
    std::string all;
    for (const std::string& p : pieces) all += p;
    int fd = c->fd;
    Send(c, all);
    if (!g_conns[static_cast<size_t>(fd)]) return;
  }
}

// Sends the tokens that are due; returns the wait until the next one (ms), or -1.
int RunDue() {
  while (!g_due.empty()) {
    int64_t now = NowMs();
    Due d = g_due.top();
    if (d.due_ms > now) return static_cast<int>(d.due_ms - now);
    g_due.pop();
    Conn* c = static_cast<size_t>(d.fd) < g_conns.size() ? g_conns[static_cast<size_t>(d.fd)].get()
                                                         : nullptr;
    if (!c || c->id != d.id) {
      --g_open_streams;
      continue;
    }
    Send(c, (*d.pieces)[d.next]);
    if (!g_conns[static_cast<size_t>(d.fd)]) {
      --g_open_streams;
      continue;
    }
    if (d.next + 1 < d.pieces->size()) {
      g_due.push({now + TokenGapMs(), d.fd, d.id, d.pieces, d.next + 1});
    } else {
      --g_open_streams;
      c->streaming = false;
      Serve(c);
    }
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  for (int i = 1; i < argc; i += 2) {
    int* target = !std::strcmp(argv[i], "--port")       ? &port
                  : !std::strcmp(argv[i], "--ttft-ms")  ? &g_ttft_ms
                  : !std::strcmp(argv[i], "--token-ms") ? &g_token_ms
                  : !std::strcmp(argv[i], "--batch")    ? &g_batch
                                                        : nullptr;
    if (!target || i + 1 >= argc) {
      std::fprintf(stderr, "usage: %s [--port N] [--ttft-ms MS] [--token-ms MS] [--batch B]\n",
                   argv[0]);
      return 2;
    }
    *target = std::atoi(argv[i + 1]);
  }
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0 ||
      ::listen(lfd, 8192) < 0) {
    std::perror("bind/listen");
    return 3;
  }
  socklen_t len = sizeof(addr);
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::printf("port %d\n", ntohs(addr.sin_port));
  std::fflush(stdout);
  g_ep = ::epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = lfd;
  ::epoll_ctl(g_ep, EPOLL_CTL_ADD, lfd, &ev);
  std::vector<epoll_event> events(1024);
  static char buf[65536];
  while (!g_stop) {
    int timeout = RunDue();
    if (timeout < 0 || timeout > 200) timeout = 200;  // notice a stop signal
    int got = ::epoll_wait(g_ep, events.data(), static_cast<int>(events.size()), timeout);
    for (int i = 0; i < got; ++i) {
      int fd = events[static_cast<size_t>(i)].data.fd;
      if (fd == lfd) {
        while (true) {
          int cfd = ::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK);
          if (cfd < 0) break;
          ::setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          epoll_event cev{};
          cev.events = EPOLLIN | EPOLLOUT | EPOLLET;
          cev.data.fd = cfd;
          ::epoll_ctl(g_ep, EPOLL_CTL_ADD, cfd, &cev);
          if (g_conns.size() <= static_cast<size_t>(cfd))
            g_conns.resize(static_cast<size_t>(cfd) + 1);
          g_conns[static_cast<size_t>(cfd)] =
              std::make_unique<Conn>(Conn{cfd, g_next_id++, {}, {}, 0, false});
        }
        continue;
      }
      if (static_cast<size_t>(fd) >= g_conns.size() || !g_conns[static_cast<size_t>(fd)]) continue;
      Conn* c = g_conns[static_cast<size_t>(fd)].get();
      if ((events[static_cast<size_t>(i)].events & EPOLLOUT) && !Flush(c)) {
        Close(c);
        continue;
      }
      bool closed = false;
      while (true) {
        ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n > 0) {
          c->in.append(buf, static_cast<size_t>(n));
          continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) closed = true;
        break;
      }
      if (closed) {
        Close(c);
        continue;
      }
      if (!c->streaming) Serve(c);
    }
  }
  std::fprintf(stderr, "requests %lld\n", g_requests);
  return 0;
}
