"""anxin_sdk: job telemetry for training processes (docs/sdk.md).

A rank reports its steps, collectives, kernels, heartbeats, checkpoints and
allocator statistics to the node's `anxin agent`, which turns them into
Prometheus metrics (step-time histogram, collective bus bandwidth, kernel
jitter, heartbeat age). This module is a thin ctypes layer over the C library
libanxin_sdk.so (include/anxin/sdk.h): calls go into an in-process buffer that
a background thread sends to the agent's socket (ANXIN_AGENT_SOCKET).

    import anxin_sdk as anxin

    anxin.hook_torch_distributed()      # time torch.distributed collectives
    for it in range(first, last):
        with anxin.step(it):
            train_step()
        if it % 1000 == 0:
            save_checkpoint(path)
            anxin.checkpoint_saved(it, path)

Nothing here raises, blocks or grows: without the library every function is
a no-op; while no agent is connected a call returns at once, counted as
unsent (the library's state is read again twice a second), at about twice
the cost of an empty Python function call; with an agent, a call adds its
argument checks and one ctypes call. An argument that cannot be used (a
negative step, a NaN duration, a name that is not text) makes the call a
no-op, counted as "ignored" in stats() when an agent is connected.

The library is looked for in this order: the file named by ANXIN_SDK_LIB
(only that one when set), next to this module, the build trees of the source
checkout this module lives in (build/release, build/test-release,
build/bench), the install prefix above this module (<prefix>/lib), and the
dynamic linker's path (ldconfig, LD_LIBRARY_PATH). load_error() says why none
was loaded; when ANXIN_AGENT_SOCKET is set, the reason is also printed once
to stderr.

Durations are in seconds (floats), as time.perf_counter() gives them.
"""

import ctypes
import operator
import os
import sys
import time

__all__ = [
    "OPS", "step", "step_begin", "step_end", "step_time", "collective", "timed_collective",
    "kernel", "timed_kernel", "heartbeat", "checkpoint_saved", "alloc_stats", "set_identity",
    "set_socket", "flush", "stats", "library", "load_error", "hook_torch_distributed",
    "unhook_torch_distributed", "run", "RankAborted",
]

ABI_VERSION = 1

# Collective operations (anxin_collective_op in sdk.h).
OPS = {
    "all_reduce": 1,
    "all_gather": 2,
    "reduce_scatter": 3,
    "all_to_all": 4,
    "broadcast": 5,
    "reduce": 6,
    "send_recv": 7,
    "barrier": 8,
    "other": 9,
}

_U64_MAX = (1 << 64) - 1


class _Stats(ctypes.Structure):
    _fields_ = [("events", ctypes.c_uint64), ("sent", ctypes.c_uint64),
                ("dropped", ctypes.c_uint64), ("unsent", ctypes.c_uint64),
                ("datagrams", ctypes.c_uint64), ("connected", ctypes.c_int),
                ("enabled", ctypes.c_int)]


class _AllocStats(ctypes.Structure):
    _fields_ = [("reserved_bytes", ctypes.c_uint64), ("allocated_bytes", ctypes.c_uint64),
                ("peak_reserved_bytes", ctypes.c_uint64), ("fragmentation", ctypes.c_double),
                ("ooms", ctypes.c_uint64), ("remaps", ctypes.c_uint64)]


_lib = None          # the loaded library, or None
_lib_path = None
_load_error = None   # why no library was loaded
_ignored = 0         # calls whose arguments could not be used
_last_step = -1      # for step() without a number


def _candidates():
    explicit = os.environ.get("ANXIN_SDK_LIB")
    if explicit:
        yield explicit
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libanxin_sdk.so")
    # A source checkout: <repo>/python/anxin_sdk. The sanitized test build is
    # left out: it loads only into a process that preloads libasan.
    repo = os.path.dirname(os.path.dirname(here))
    for preset in ("release", "test-release", "bench"):
        yield os.path.join(repo, "build", preset, "lib", "libanxin_sdk.so")
    # An install: <prefix>/lib/python3/dist-packages/anxin_sdk.
    d = here
    for _ in range(4):
        d = os.path.dirname(d)
        yield os.path.join(d, "lib", "libanxin_sdk.so")
    yield "libanxin_sdk.so"


def _needs_asan(path):
    """True when path was built with AddressSanitizer and this process lacks
    its runtime: loading it would end the process."""
    try:
        with open(path, "rb") as f:
            if b"libasan.so" not in f.read():
                return False
    except OSError:
        return False
    try:
        ctypes.CDLL(None).__asan_init
        return False
    except AttributeError:
        return True


def _load():
    global _lib, _lib_path, _load_error
    tried = []
    explicit = os.environ.get("ANXIN_SDK_LIB")
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            if path == explicit:
                tried.append("ANXIN_SDK_LIB=%s: no such file" % path)
            continue
        if os.sep in path and _needs_asan(path):
            tried.append("%s: built with AddressSanitizer; preload libasan to use it" % path)
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(str(e))
            continue
        try:
            version = lib.anxin_sdk_abi_version()
        except AttributeError:
            tried.append("%s: not the anxin SDK (no anxin_sdk_abi_version)" % path)
            continue
        if version != ABI_VERSION:
            tried.append("%s: ABI version %d, this module speaks %d" % (path, version, ABI_VERSION))
            continue
        _bind(lib)
        _lib, _lib_path = lib, path
        return
    _load_error = "libanxin_sdk.so not found (%s); set ANXIN_SDK_LIB to its path" % (
        "; ".join(tried) if tried else "looked next to the module, in the build tree, "
        "the install prefix and the linker path")
    if os.environ.get("ANXIN_AGENT_SOCKET"):
        sys.stderr.write("anxin_sdk: %s: telemetry is off\n" % _load_error)


def _bind(lib):
    u64, c_int, c_char_p = ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p
    sig = {
        "anxin_step_begin": ([u64], None),
        "anxin_step_end": ([u64], None),
        "anxin_step_time": ([u64, u64], None),
        "anxin_collective": ([c_int, u64, u64, c_char_p, c_int], None),
        "anxin_kernel": ([c_char_p, u64], None),
        "anxin_heartbeat": ([], None),
        "anxin_checkpoint_saved": ([u64, c_char_p], None),
        "anxin_report_alloc_stats": ([c_int, ctypes.POINTER(_AllocStats)], None),
        "anxin_sdk_set_identity": ([c_char_p, c_int, c_int], c_int),
        "anxin_sdk_set_socket": ([c_char_p], c_int),
        "anxin_sdk_flush": ([c_int], c_int),
        "anxin_sdk_get_stats": ([ctypes.POINTER(_Stats)], None),
    }
    for name, (args, res) in sig.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = res


# ---- the connection gate ----------------------------------------------------
#
# While no agent is connected the library would only count a call as unsent,
# and converting the arguments for ctypes costs far more than that; so the
# calls return at once, counted here (stats()["unsent"]), and the library's
# state is read again at most every _RECHECK_S (it looks for the agent once a
# second on its own thread).

_RECHECK_S = 0.5
_on = False          # an agent is connected: calls go to the library
_next_check = 0.0    # time.monotonic() of the next look at the library's state
_skipped = 0         # calls made while no agent was connected
_monotonic = time.monotonic


def _recheck():
    """Reads the library's connection state; True when calls should go to it."""
    global _on, _next_check
    _next_check = _monotonic() + _RECHECK_S
    try:
        s = _Stats()
        _lib.anxin_sdk_get_stats(ctypes.byref(s))
        _on = bool(s.connected)
    except Exception:
        _on = False
    return _on


def _off():
    """Called when _on is False: True (count the call, skip it) unless it is
    time to look again and an agent has come."""
    global _skipped
    if _monotonic() >= _next_check and _recheck():
        return False
    _skipped += 1
    return True


# ---- argument checks: a bad value raises, and the public functions turn that
# into an ignored call ---------------------------------------------------------

_MAX_NS = (1 << 64) - 1
_TEXT_CACHE_MAX = 1024
_texts = {None: None}  # str -> its bytes for the library, for names used again


def _u64(x):
    v = x if x.__class__ is int else operator.index(x)  # ints, numpy integers
    if v < 0 or v > _U64_MAX:
        raise ValueError(x)
    return v


def _ns(seconds):
    ns = int(seconds * 1e9)  # NaN, infinities and non-numbers raise here
    if ns < 0:
        raise ValueError(seconds)
    return ns if ns <= _MAX_NS else _MAX_NS


def _text(x):
    b = _texts.get(x) if x.__class__ is str or x is None else None
    if b is not None or x is None:
        return b
    if x.__class__ is str:
        b = x.encode("utf-8", "replace")
        if len(_texts) < _TEXT_CACHE_MAX:
            _texts[x] = b
        return b
    if isinstance(x, (bytes, bytearray)):
        return bytes(x)
    raise TypeError(x)


_OP_CODES = dict(OPS)
_OP_CODES.update({v: v for v in OPS.values()})


def _ignore():
    global _ignored
    _ignored += 1


# ---- the calls --------------------------------------------------------------

def step_begin(n):
    """A step begins (anxin_step_begin)."""
    if not _on and _off():
        return
    try:
        _lib.anxin_step_begin(_u64(n))
    except Exception:
        _ignore()


def step_end(n):
    """A step ended: its duration is the time since step_begin(n)."""
    global _last_step
    if not _on and _off():
        _last_step = n if n.__class__ is int and n >= 0 else _last_step
        return
    try:
        v = _u64(n)
        _lib.anxin_step_end(v)
        _last_step = v
    except Exception:
        _ignore()


def step_time(n, seconds):
    """A step the caller timed itself."""
    global _last_step
    if not _on and _off():
        return
    try:
        v = _u64(n)
        _lib.anxin_step_time(v, _ns(seconds))
        _last_step = v
    except Exception:
        _ignore()


class step:
    """Context manager around one training step:

        with anxin_sdk.step(it):
            ...

    step() without a number takes the one after the last step that ended.
    A step left by an exception is not reported as ended."""

    __slots__ = ("n",)

    def __init__(self, n=None):
        self.n = n

    def __enter__(self):
        if self.n is None:
            self.n = _last_step + 1
        step_begin(self.n)
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            step_end(self.n)
        return False


def collective(op, nbytes, seconds, algorithm=None, group_size=0):
    """One collective: op is a name in OPS ("all_reduce", ...) or its number;
    nbytes follows nccl-tests' size (the whole buffer: for all_gather the
    gathered output, for reduce_scatter the input); group_size 0 = the world."""
    if not _on and _off():
        return
    try:
        g = group_size if group_size.__class__ is int else operator.index(group_size)
        if g < 0:
            raise ValueError(group_size)
        _lib.anxin_collective(_OP_CODES[op], _u64(nbytes), _ns(seconds), _text(algorithm),
                              g if g < 1 << 30 else 1 << 30)
    except Exception:
        _ignore()


class timed_collective:
    """Times the block and reports it as one collective:

        with anxin_sdk.timed_collective("all_reduce", grad.nbytes):
            comm.all_reduce(grad)
    """

    __slots__ = ("args", "t0")

    def __init__(self, op, nbytes, algorithm=None, group_size=0):
        self.args = (op, nbytes, algorithm, group_size)

    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            op, nbytes, algorithm, group_size = self.args
            collective(op, nbytes, time.perf_counter() - self.t0, algorithm, group_size)
        return False


def kernel(name, seconds):
    """One run of a kernel (or any named phase) that took `seconds`."""
    if not _on and _off():
        return
    try:
        if name is None:
            raise TypeError(name)
        _lib.anxin_kernel(_text(name), _ns(seconds))
    except Exception:
        _ignore()


class timed_kernel:
    """Times the block and reports it as one run of kernel `name`."""

    __slots__ = ("name", "t0")

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            kernel(self.name, time.perf_counter() - self.t0)
        return False


def heartbeat():
    """This rank is alive (for long phases without steps)."""
    if not _on and _off():
        return
    try:
        _lib.anxin_heartbeat()
    except Exception:
        _ignore()


def checkpoint_saved(n, path):
    """A checkpoint of step n was written completely to path."""
    if not _on and _off():
        return
    try:
        p = os.fspath(path)
        if p.__class__ is not str and not isinstance(p, bytes):
            raise TypeError(path)
        _lib.anxin_checkpoint_saved(_u64(n), p.encode("utf-8", "replace") if isinstance(p, str)
                                    else p)
    except Exception:
        _ignore()


def alloc_stats(device, reserved_bytes=0, allocated_bytes=0, peak_reserved_bytes=0,
                fragmentation=0.0, ooms=0, remaps=0):
    """Device-memory allocator statistics for one device (ooms and remaps are
    cumulative counts)."""
    if not _on and _off():
        return
    try:
        d = operator.index(device)
        if d < 0 or d > 1 << 30:
            raise ValueError(device)
        s = _AllocStats(_u64(reserved_bytes), _u64(allocated_bytes), _u64(peak_reserved_bytes),
                        float(fragmentation), _u64(ooms), _u64(remaps))
        _lib.anxin_report_alloc_stats(d, ctypes.byref(s))
    except Exception:
        _ignore()


def set_identity(job_id=None, rank=0, world_size=1):
    """Sets job id, rank and world size instead of the environment's
    (ANXIN_JOB_ID, RANK, WORLD_SIZE, ...). True when they were valid."""
    try:
        return _lib.anxin_sdk_set_identity(_text(job_id), operator.index(rank),
                                           operator.index(world_size)) == 0
    except Exception:
        _ignore()
        return False


def set_socket(path):
    """Sends to the agent socket at path from now on (None or "": off)."""
    try:
        p = None if path is None else _text(os.fspath(path))
        ok = _lib.anxin_sdk_set_socket(p) == 0
        _recheck()
        return ok
    except Exception:
        _ignore()
        return False


def flush(timeout=1.0):
    """Waits up to timeout seconds until everything reported so far has been
    handed to the agent. True when it all was; False without an agent, with
    losses, or out of time."""
    try:
        ms = int(min(max(float(timeout), 0.0), 3600.0) * 1000)
        return _lib.anxin_sdk_flush(ms) == 0
    except Exception:
        _ignore()
        return False


def stats():
    """The SDK's counters as a dict: events, sent, dropped (lost while an agent
    was connected), unsent (made while none was; also the calls this module
    kept from the library for that reason), datagrams, connected, enabled;
    plus loaded (the library is there) and ignored (calls whose arguments
    could not be used)."""
    out = {"events": 0, "sent": 0, "dropped": 0, "unsent": 0, "datagrams": 0,
           "connected": False, "enabled": False}
    try:
        s = _Stats()
        _lib.anxin_sdk_get_stats(ctypes.byref(s))
        out = {"events": s.events + _skipped, "sent": s.sent, "dropped": s.dropped,
               "unsent": s.unsent + _skipped, "datagrams": s.datagrams,
               "connected": bool(s.connected), "enabled": bool(s.enabled)}
    except Exception:
        pass
    out["loaded"] = _lib is not None
    out["ignored"] = _ignored
    return out


def library():
    """The path of the loaded libanxin_sdk.so, or None."""
    return _lib_path


def load_error():
    """Why no library was loaded, or None."""
    return _load_error


def hook_torch_distributed():
    """Times torch.distributed's collectives (all_reduce, all_gather,
    reduce_scatter, broadcast, all_to_all, barrier and their tensor
    variants) and reports each one. True when hooked; False when torch or
    torch.distributed is not there. Safe to call more than once."""
    if _lib is None:
        return False  # nothing to report to: leave torch as it is
    try:
        from anxin_sdk import _torch_hook
        return _torch_hook.install(sys.modules[__name__])
    except Exception:
        return False


def unhook_torch_distributed():
    """Puts the original torch.distributed functions back."""
    try:
        from anxin_sdk import _torch_hook
        _torch_hook.uninstall()
    except Exception:
        pass


def run(train, backend="gloo", timeout_seconds=1800, fault_wait_seconds=5.0):
    """Runs train(ctx) with in-process restart under `anxin run`: the process
    group is set up here (torch.distributed, `backend`) and, when the
    supervisor recovers from a fault this process survived, the group is
    aborted, set up again for the new generation and train(ctx) called again
    with the agreed checkpoint (ctx.checkpoint, ctx.step). ctx also holds
    rank, world_size, local_rank, generation and restarts. Returns what
    train returned. See docs/sdk.md, "In-process restart"."""
    from anxin_sdk import _restart
    return _restart.run(train, backend, timeout_seconds, fault_wait_seconds)


def __getattr__(name):
    if name == "RankAborted":
        from anxin_sdk import _restart
        return _restart.RankAborted
    raise AttributeError(name)


_load()

if _lib is not None:
    _recheck()  # the library's first call: it connects now if an agent is there
else:
    # No library: every call is an empty function.
    def _nothing(*args, **kwargs):
        return None

    def _false(*args, **kwargs):
        return False

    step_begin = step_end = step_time = collective = kernel = heartbeat = _nothing
    checkpoint_saved = alloc_stats = _nothing
    set_identity = set_socket = flush = _false
