"""Times torch.distributed collectives for anxin_sdk.hook_torch_distributed().

Each wrapped function is called with async_op=True, which is what its
synchronous form does inside torch anyway (start the work, then wait()); the
duration runs from the call to the completion of the work's future, so it is
right on CPU (gloo) and, on GPUs and NPUs, includes any time the operation
waited behind earlier work on its stream. The caller's own async_op choice is
kept: with async_op=False the wrapper waits and returns None, with True it
returns the work. Bytes follow nccl-tests' size: the tensor for all_reduce,
broadcast and reduce, the gathered output for all_gather, the input for
reduce_scatter and all_to_all; barriers carry none. A collective called from
inside another wrapped one (torch composing them) is counted once, as the
outer one. While no agent is connected the original function is called
directly. Works that give no future (some backends) are timed by their
wait() when the call is synchronous and left untimed when not.
"""

import inspect
import os
import threading
import time

# name: (op, parameter holding the data, what it is)
_SPECS = {
    "all_reduce": ("all_reduce", "tensor", "one"),
    "broadcast": ("broadcast", "tensor", "one"),
    "reduce": ("reduce", "tensor", "one"),
    "all_gather": ("all_gather", "tensor_list", "list"),
    "all_gather_into_tensor": ("all_gather", "output_tensor", "one"),
    "_all_gather_base": ("all_gather", "output_tensor", "one"),
    "reduce_scatter": ("reduce_scatter", "input_list", "list"),
    "reduce_scatter_tensor": ("reduce_scatter", "input", "one"),
    "_reduce_scatter_base": ("reduce_scatter", "input", "one"),
    "all_to_all": ("all_to_all", "input_tensor_list", "list"),
    "all_to_all_single": ("all_to_all", "input", "one"),
    "barrier": ("barrier", None, "none"),
}

_lock = threading.Lock()
_originals = {}  # (module, name) -> original function
_inside = threading.local()


def _nbytes(t):
    return t.numel() * t.element_size()


def _position(sig, name):
    names = list(sig.parameters)
    return names.index(name) if name in names else None


def _wrap(sdk, dist, name, fn):
    op, data, kind = _SPECS[name]
    sig = inspect.signature(fn)
    data_pos = _position(sig, data) if data else None
    group_pos = _position(sig, "group")
    async_pos = _position(sig, "async_op")
    if async_pos is None or (data is not None and data_pos is None):
        return None  # a signature this hook does not know: leave it alone
    identity_set = []

    def arg(args, kwargs, pos, key):
        if pos is not None and pos < len(args):
            return args[pos]
        return kwargs.get(key)

    def measure(args, kwargs):
        nbytes = 0
        if kind == "one":
            nbytes = _nbytes(arg(args, kwargs, data_pos, data))
        elif kind == "list":
            nbytes = sum(_nbytes(t) for t in arg(args, kwargs, data_pos, data))
        group = arg(args, kwargs, group_pos, "group")
        size = 0 if group is None else dist.get_world_size(group)
        if not identity_set:
            identity_set.append(True)
            # torchrun sets RANK; a job that set up its process group
            # otherwise still reports under its real rank.
            if "RANK" not in os.environ and dist.is_initialized():
                sdk.set_identity(None, dist.get_rank(), dist.get_world_size())
        return nbytes, size

    def wrapper(*args, **kwargs):
        if (not sdk._on and sdk._off()) or getattr(_inside, "depth", 0):
            return fn(*args, **kwargs)  # no agent to tell, or inside another one
        try:
            nbytes, size = measure(args, kwargs)
        except Exception:
            return fn(*args, **kwargs)  # arguments torch will judge
        want_async = bool(arg(args, kwargs, async_pos, "async_op"))
        if async_pos < len(args):
            args = args[:async_pos] + (True,) + args[async_pos + 1:]
        else:
            kwargs["async_op"] = True
        _inside.depth = 1
        t0 = time.perf_counter()
        try:
            work = fn(*args, **kwargs)
        finally:
            _inside.depth = 0
        if work is None:  # this rank is not in the group
            return None
        timed = False
        try:
            def done(_future):
                sdk.collective(op, nbytes, time.perf_counter() - t0, None, size)
            work.get_future().add_done_callback(done)
            timed = True
        except Exception:
            pass
        if want_async:
            return work
        work.wait()
        if not timed:
            sdk.collective(op, nbytes, time.perf_counter() - t0, None, size)
        return None

    wrapper.__name__ = getattr(fn, "__name__", name)
    wrapper.__qualname__ = getattr(fn, "__qualname__", name)
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn
    wrapper.__anxin_sdk_hook__ = True
    return wrapper


def install(sdk):
    try:
        import torch.distributed as dist
    except Exception:
        return False
    if not dist.is_available():
        return False
    c10d = getattr(dist, "distributed_c10d", None)
    with _lock:
        for name in _SPECS:
            fn = getattr(dist, name, None)
            if fn is None or getattr(fn, "__anxin_sdk_hook__", False):
                continue
            wrapper = _wrap(sdk, dist, name, fn)
            if wrapper is None:
                continue
            # Both the public name and torch's own module, where torch's
            # helpers (all_gather_object, ...) look the function up.
            for module in (dist, c10d):
                if module is not None and getattr(module, name, None) is fn:
                    _originals[(module, name)] = fn
                    setattr(module, name, wrapper)
    return True


def uninstall():
    with _lock:
        for (module, name), fn in _originals.items():
            setattr(module, name, fn)
        _originals.clear()
