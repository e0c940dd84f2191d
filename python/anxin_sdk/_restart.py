"""In-process restart and warm spares for anxin_sdk.run() (docs/sdk.md).

Under `anxin run` a rank finds ANXIN_CONTROL_SOCKET (an abstract Unix stream
socket the supervisor listens on) and ANXIN_CONTROL_TOKEN (which process it
is) in its environment. It connects, says hello, and a control thread reads
the supervisor's JSON lines:

  {"abort": {"generation": G}}
      end the in-flight collectives and train(): the TCP sockets the process
      group opened are shut down (gloo's pending operations then fail at
      once), and the main thread gets RankAborted (a signal handler raises it,
      so a rank sleeping or computing in Python is interrupted too). Once
      train() has unwound and the group is destroyed, the rank answers
      {"aborted": {"generation": G}}.
  {"rejoin": {"generation": G, "env": {...}, "checkpoint": P, "step": N}}
      the new generation: the environment (RANK, WORLD_SIZE, MASTER_ADDR,
      MASTER_PORT, LOCAL_RANK, device visibility, ANXIN_RUN_ATTEMPT, ...) is
      applied, a new group initialised and train(ctx) called again. A warm
      spare (ANXIN_SPARE=1) waits for this message before its first group.

The control connection closing (the supervisor died) ends the process: a
rank is never left running without its supervisor.
"""

import datetime
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback


class RankAborted(BaseException):
    """Raised in the main thread when the supervisor aborts this generation.
    A BaseException, so that the job's own `except Exception` does not swallow
    it."""


class Context:
    """What train(ctx) gets: where this rank sits in this generation and the
    checkpoint all ranks agreed to resume from ("" and 0: from scratch)."""

    def __init__(self, env, checkpoint, step, generation, restarts, in_process):
        self.rank = int(env.get("RANK", "0"))
        self.world_size = int(env.get("WORLD_SIZE", "1"))
        self.local_rank = int(env.get("LOCAL_RANK", str(self.rank)))
        self.checkpoint = checkpoint
        self.step = int(step)
        self.generation = int(generation)
        self.restarts = restarts  # in-process restarts of this process so far
        self.in_process = in_process  # False on this process's first train() call

    def __repr__(self):
        return ("Context(rank=%d, world_size=%d, generation=%d, checkpoint=%r, step=%d)"
                % (self.rank, self.world_size, self.generation, self.checkpoint, self.step))


def _socket_fds():
    out = {}
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return out
    for fd in names:
        try:
            link = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if link.startswith("socket:"):
            out[int(fd)] = link
    return out


def _shutdown_group_sockets(fds, master_port):
    """Shuts down the TCP sockets the process group opened, except the
    rendezvous store's server side (its thread ends the process on a
    shut-down listener). Returns how many were shut down."""
    n = 0
    for fd in fds:
        try:
            dup = os.dup(fd)
        except OSError:
            continue
        try:
            s = socket.socket(fileno=dup)
        except OSError:
            os.close(dup)
            continue
        try:
            if s.family not in (socket.AF_INET, socket.AF_INET6) or s.type != socket.SOCK_STREAM:
                continue
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                continue
            if s.getsockname()[1] == master_port:
                continue
            s.shutdown(socket.SHUT_RDWR)
            n += 1
        except OSError:
            pass
        finally:
            s.close()
    return n


def _abort_backend():
    """Aborts the communicators of a device backend (NCCL) where this torch
    offers it: torch.distributed's _abort_process_group (newer torch), else
    the NCCL backend object's abort (ncclCommAbort on each communicator).
    Returns what it called, or "" when there is nothing to call (torch 1.13;
    gloo, whose sockets _shutdown_group_sockets ends; torch_npu's HCCL): the
    rank is then interrupted by the abort signal or, blocked in a device
    collective, killed by the supervisor at its deadline."""
    try:
        import torch
        import torch.distributed as dist
        if not dist.is_initialized():
            return ""
        c10d = dist.distributed_c10d
        if dist.get_backend() != "nccl":
            return ""
        fn = getattr(c10d, "_abort_process_group", None)
        if fn is not None:
            fn()
            return "_abort_process_group"
        pg = c10d._get_default_group()
        get = getattr(pg, "_get_backend", None)
        nccl = get(torch.device("cuda")) if get is not None else pg
        for name in ("abort", "_abort"):
            f = getattr(nccl, name, None)
            if f is not None:
                f()
                return "ProcessGroupNCCL." + name
    except Exception:
        pass
    return ""


class _Control:
    def __init__(self, address, token):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        name = address[1:] if address.startswith("@") else address
        self.sock.connect(("\0" + name) if address.startswith("@") else name)
        self.token = token
        self.lock = threading.Lock()
        self.send_lock = threading.Lock()
        self.cv = threading.Condition(self.lock)
        self.abort_generation = None  # set while an abort is pending
        self.rejoin = None
        self.closed = False
        self.group_fds = []
        self.master_port = 0
        self.armed = False  # train() runs in the main thread
        self.raised = False  # the handler raised RankAborted for this abort
        self.idle = False  # between generations: no group, waiting for rejoin
        self.send({"hello": {"token": token, "pid": os.getpid()}})
        self.thread = threading.Thread(target=self._read, name="anxin-control", daemon=True)
        self.thread.start()

    def send(self, msg):
        data = (json.dumps(msg) + "\n").encode()
        with self.send_lock:
            try:
                self.sock.sendall(data)
            except OSError:
                pass

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                # The supervisor is gone: nobody will ever tell this rank what
                # to do, and it must not be left behind.
                sys.stderr.write("anxin_sdk: the supervisor's control socket closed: exiting\n")
                sys.stderr.flush()
                os._exit(1)
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                self._handle(msg)

    def _handle(self, msg):
        if "abort" in msg:
            gen = int(msg["abort"].get("generation", 0))
            with self.cv:
                self.abort_generation = gen
                fds, port, armed = list(self.group_fds), self.master_port, self.armed
                idle = self.idle
                self.cv.notify_all()
            if idle:  # a fault during the restart: nothing to abort here
                self.send({"aborted": {"generation": gen}})
                return
            _shutdown_group_sockets(fds, port)
            _abort_backend()
            if armed:
                signal.pthread_kill(threading.main_thread().ident, _ABORT_SIGNAL)
        elif "rejoin" in msg:
            with self.cv:
                self.rejoin = msg["rejoin"]
                self.cv.notify_all()

    def wait_rejoin(self):
        with self.cv:
            while self.rejoin is None:
                self.cv.wait()
            r, self.rejoin = self.rejoin, None
            self.abort_generation = None
            self.raised = False
            self.idle = False
            return r

    def wait_abort(self, seconds):
        with self.cv:
            self.cv.wait_for(lambda: self.abort_generation is not None, seconds)
            return self.abort_generation


# The signal that interrupts the main thread on an abort (SIGUSR2 unless
# ANXIN_ABORT_SIGNAL names another, e.g. SIGRTMIN+3).
def _abort_signal():
    name = os.environ.get("ANXIN_ABORT_SIGNAL", "SIGUSR2")
    if name.startswith("SIGRTMIN+"):
        return signal.SIGRTMIN + int(name[len("SIGRTMIN+"):])
    return getattr(signal, name, signal.SIGUSR2)


_ABORT_SIGNAL = _abort_signal()
_control = None


def _on_abort_signal(_signum, _frame):
    c = _control
    if c is not None and c.armed and c.abort_generation is not None and not c.raised:
        c.raised = True
        raise RankAborted("aborted by the supervisor (generation %d)" % c.abort_generation)


def _wait_for_store(seconds=2.0):
    """A rank other than 0 waits (briefly) until rank 0's rendezvous store
    listens: torch's store client, refused, tries again only a second later,
    which would be most of an in-process restart."""
    if os.environ.get("RANK", "0") == "0":
        return
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    try:
        port = int(os.environ.get("MASTER_PORT", "0"))
    except ValueError:
        return
    if port <= 0:
        return
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection((addr, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.005)


def _tell_identity():
    """The telemetry SDK reports under this generation's rank."""
    sdk = sys.modules.get("anxin_sdk")
    if sdk is not None and "RANK" in os.environ:
        try:
            sdk.set_identity(None, int(os.environ["RANK"]), int(os.environ.get("WORLD_SIZE", "1")))
        except Exception:
            pass


def run(train, backend="gloo", timeout_seconds=1800, fault_wait_seconds=5.0):
    """Runs train(ctx) under `anxin run` with in-process restart; returns
    what train returned. Without ANXIN_CONTROL_SOCKET (another launcher, or
    anxin run --no-in-process) the process group is set up from the
    environment and train is called once, as a plain trainer would.

    backend: torch.distributed's ("gloo", "nccl", "hccl"); timeout_seconds:
    the group's collective timeout; fault_wait_seconds: how long a rank whose
    train() raised waits for the supervisor's abort before it exits with the
    error (the supervisor then relaunches it as a process)."""
    global _control
    import torch.distributed as dist

    address = os.environ.get("ANXIN_CONTROL_SOCKET", "")
    env = dict(os.environ)
    checkpoint = env.get("ANXIN_RESUME_CHECKPOINT", "")
    step = int(env.get("ANXIN_RESUME_STEP", "0") or 0)
    generation = int(env.get("ANXIN_RUN_ATTEMPT", "0") or 0)
    timeout = datetime.timedelta(seconds=timeout_seconds)
    if not address:
        dist.init_process_group(backend, timeout=timeout)
        try:
            return train(Context(env, checkpoint, step, generation, 0, False))
        finally:
            dist.destroy_process_group()

    _control = ctl = _Control(address, os.environ.get("ANXIN_CONTROL_TOKEN", ""))
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        signal.signal(_ABORT_SIGNAL, _on_abort_signal)
    if os.environ.get("ANXIN_SPARE") == "1":
        ctl.send({"spare_ready": {"pid": os.getpid()}})
        msg = ctl.wait_rejoin()
        os.environ.update(msg.get("env", {}))
        os.environ.pop("ANXIN_SPARE", None)
        checkpoint, step = msg.get("checkpoint", ""), int(msg.get("step", 0))
        generation = int(msg.get("generation", 0))
    restarts = 0
    while True:
        _tell_identity()
        # The abort signal's handler raises RankAborted at most once per
        # abort and only while armed; it may do so anywhere in train() or in
        # the first lines of the handling below, hence the two levels. A
        # group that cannot form (a peer died during the rendezvous) is a
        # fault like one in train().
        outcome = None
        try:
            try:
                _wait_for_store()
                before = _socket_fds()
                dist.init_process_group(backend, timeout=timeout)
                after = _socket_fds()
                with ctl.cv:
                    ctl.group_fds = [fd for fd, link in after.items() if before.get(fd) != link]
                    ctl.master_port = int(os.environ.get("MASTER_PORT", "0") or 0)
                    ctl.armed = in_main
                    pending = ctl.abort_generation is not None
                if pending:
                    raise RankAborted("aborted before train() began")
                ctx = Context(dict(os.environ), checkpoint, step, generation, restarts,
                              restarts > 0)
                result = train(ctx)
                ctl.armed = False
                outcome = (True, result)
            except BaseException as e:  # noqa: B902 -- the abort is a BaseException on purpose
                ctl.armed = False
                outcome = (False, e)
        except RankAborted as e:
            ctl.armed = False
            if outcome is None:
                outcome = (False, e)
        ok, value = outcome
        if ok:
            dist.destroy_process_group()
            return value
        if not isinstance(value, RankAborted) and ctl.abort_generation is None:
            if isinstance(value, (KeyboardInterrupt, SystemExit)):
                raise value
            # A collective that failed because a peer died, a bug in the
            # job: the traceback goes to the log (the supervisor's detectors
            # read it); the supervisor either aborts this generation soon or
            # this process ends with the error.
            traceback.print_exception(type(value), value, value.__traceback__)
            sys.stderr.flush()
            if ctl.wait_abort(fault_wait_seconds) is None:
                raise value
        # Aborted: leave the group, tell the supervisor, wait for the next one.
        try:
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:
            pass
        with ctl.cv:
            gen = ctl.abort_generation
            ctl.group_fds = []
            ctl.idle = True
            sys.stdout.flush()
            ctl.send({"aborted": {"generation": gen}})
        msg = ctl.wait_rejoin()
        os.environ.update(msg.get("env", {}))
        checkpoint, step = msg.get("checkpoint", ""), int(msg.get("step", 0))
        generation = int(msg.get("generation", 0))
        restarts += 1
