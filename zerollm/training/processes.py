"""Batch shards in worker processes: the data parallelism of zerollm.training.parallel without the GIL.

Threads share one interpreter, and every NumPy call takes Python's GIL back when it returns. Where
handing the GIL between two busy threads is slow (measured on a 2-vCPU KVM guest: NumPy additions
of 50k floats ran 1.25x faster on 2 threads, 1.9x on 2 processes), the shard threads gain little:
nanoGPT's CPU model trained only 1.1x faster with 2 shard threads than with one. Processes have no
GIL to share. With n shards this process computes the first one and n - 1 forked workers the rest:

- before each batch this process copies the current weights into shared memory, where the workers'
  models read them (one copy: milliseconds, even for 10M parameters; a worker holds no weights of its
  own), and sends the model's small settings (train/eval, amp, loss scale, the engine) through a pipe;
- a worker computes fn(replica, shard) exactly as a shard thread would (the same replica, the same
  dropout seed) and writes every array of the result into its own shared-memory area; the pipe
  carries only where they lie;
- only functions marked ``model_only`` go to the workers: their result depends on the model's weights
  and the rows alone, so nothing else this process holds has to reach them. Any other function runs
  in the shard threads as before.

The shards, their seeds and the order of the additions are the threads' (zerollm.training.parallel),
so the losses are bit-identical between the two. A worker that dies (killed, out of memory) is not
fatal: its shard is computed here instead and the remaining steps use threads. Workers ignore Ctrl-C;
this process decides what an interrupt means (the trainer saves at the step's end).
"""

import atexit
import io
import mmap
import multiprocessing
import multiprocessing.util
import os
import pickle
import signal
import sys
import weakref

import numpy as np

from zerollm.engine.memory import reset_peak_rss, status_kib
from zerollm.engine.threads import by_name_in_parts
from zerollm.io.errors import ZeroLLMError

ENV = "ZEROLLM_SHARD_WORKERS"      # 'processes' or 'threads'; unset: processes where fork is safe
MODES = ("processes", "threads")


def model_only(fn):
    """Mark fn(model, rows) as depending on nothing but the model's weights and settings and the rows
    (no other state, no side effects the caller needs): ShardedModel may then run it in a worker process."""
    fn.model_only = True
    return fn


def picklable(fn):
    """True when fn can be named to another process (a module-level function; not a lambda or a
    function defined inside another): only those can go to the workers."""
    try:
        pickle.dumps(fn)
    except Exception:          # PicklingError, AttributeError ("Can't pickle local object"), TypeError
        return False
    return True


def worker_mode():
    """'processes' or 'threads' for shard workers: $ZEROLLM_SHARD_WORKERS, else processes on Linux
    (fork; macOS's system libraries are not fork-safe, Windows has no fork)."""
    mode = os.environ.get(ENV)
    if mode is None or mode == "":
        return "processes" if sys.platform.startswith("linux") else "threads"
    if mode not in MODES:
        raise ZeroLLMError(f"${ENV} must be 'processes' or 'threads', got {mode!r} (or unset it)")
    return mode


def _aligned(n):
    return (n + 63) // 64 * 64


class _Area:
    """Anonymous shared memory (mapped before the fork, so both processes see the same pages)."""

    def __init__(self, nbytes):
        self.buf = mmap.mmap(-1, max(_aligned(nbytes), mmap.PAGESIZE))
        self.nbytes = len(self.buf)

    def view(self, offset, shape, dtype):
        return np.ndarray(shape, dtype, buffer=self.buf, offset=offset)


_ADAPTER = "lora:"          # how weight_arrays names a LoRA adapter (apart from the parameters)


def weight_arrays(model):
    """[(name, array)] a worker must receive before each batch: the parameters and any LoRA adapters."""
    out = list(model.params.items())
    if getattr(model, "lora", None) is not None:
        out += [(_ADAPTER + k, v) for k, v in model.lora.adapters.items()]
    return out


def signature(model):
    """What must not change while workers hold a forked copy of the model (else they are restarted)."""
    return (repr(model.config), tuple((k, v.shape, v.dtype.str) for k, v in weight_arrays(model)))


class _Packer(pickle.Pickler):
    """Pickles a result with its (numeric) arrays copied into a shared area; the pickle keeps their places."""

    def __init__(self, file, area):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.area, self.used = area, 0

    def persistent_id(self, obj):
        if type(obj) is np.ndarray and obj.dtype.kind in "biuf" and obj.nbytes <= self.area.nbytes - self.used:
            offset = self.used
            np.copyto(self.area.view(offset, obj.shape, obj.dtype), obj)
            self.used = _aligned(offset + obj.nbytes)
            return (offset, obj.shape, obj.dtype.str)
        return None        # anything else (or what no longer fits) goes through the pipe


class _Unpacker(pickle.Unpickler):
    def __init__(self, data, area, copy):
        super().__init__(io.BytesIO(data))
        self.area, self.copy = area, copy

    def persistent_load(self, pid):
        offset, shape, dtype = pid
        view = self.area.view(offset, shape, np.dtype(dtype))
        return view.copy() if self.copy else view


def _pack(obj, area):
    out = io.BytesIO()
    _Packer(out, area).dump(obj)
    return out.getvalue()


def _apply_settings(model, settings):
    from zerollm.engine import get_engine, set_engine
    training, amp, grad_scale, engine = settings
    model.training, model.amp, model.grad_scale = training, amp, grad_scale
    if get_engine() != engine:
        set_engine(engine)


def _growth_kib(base):
    """Peak RSS growth since ``base`` (KiB), less the shared areas (the parent counts those)."""
    try:
        shared = status_kib("RssShmem")
    except OSError:                                    # a kernel without the line: nothing subtracted
        shared = 0
    return max(status_kib("VmHWM") - base - shared, 0)


def _worker(conn, parent_ends, model, weights, layout, results):
    """The loop of one worker process: receive (fn, rows, seed, settings), answer ('ok', packed result);
    None ends it, "memory" asks for its memory growth."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)     # not the parent's handler (the trainer's saves a run)
    for end in parent_ends:    # the fork copied the parent's ends of the pipes: while this process held
        end.close()            # them, it would never see its own pipe close when the parent dies
    base = reset_peak_rss()                            # the pages shared with the parent at the fork are not its own
    from threadpoolctl import threadpool_limits
    threadpool_limits(1)                               # one core per shard, as the shard threads
    numba = sys.modules.get("numba")                   # the fast engine's: the parent imported it already,
    if numba is not None:                              # and the fork copied it
        numba.set_num_threads(1)
    else:                                              # not imported (0.4 s a worker) until a fast kernel is
        os.environ["NUMBA_NUM_THREADS"] = "1"          # asked for; it then starts with one thread too
    # a worker only reads the weights: its model uses the shared pages themselves (no copy of its own)
    for offset, (name, arr) in zip(layout, weight_arrays(model)):
        view = weights.view(offset, arr.shape, arr.dtype)
        if name.startswith(_ADAPTER):
            model.lora.adapters[name[len(_ADAPTER):]] = view
        else:
            model.params[name] = view
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return                                     # the parent is gone
        if message is None:
            return
        if message == "memory":
            conn.send(None if base is None else _growth_kib(base))       # its peak RSS growth since the fork
            continue
        fn, rows, seed, settings = message
        try:
            _apply_settings(model, settings)
            result = fn(model.replica(np.random.default_rng(int(seed))), rows)
            answer = ("ok", _pack(result, results))
        except BaseException as err:                   # noqa: BLE001 -- handed to the parent to raise
            try:
                answer = ("error", pickle.dumps(err))
            except Exception:                          # an exception that does not pickle
                answer = ("error", pickle.dumps(RuntimeError(f"{type(err).__name__}: {err}")))
        try:
            conn.send(answer)
        except (OSError, EOFError):
            return                                     # the parent is gone


class ProcessShards:
    """n - 1 forked workers holding a copy of ``model``; ``map`` runs shard 0 here and the others there."""

    def __init__(self, model, n_workers, pool=None):
        """pool: the shard threads (zerollm.engine.threads.ThreadPool), which share the copying of the weights."""
        self.model, self.signature, self.pool = model, signature(model), pool
        arrays = [arr for _, arr in weight_arrays(model)]
        self.layout, total = [], 0
        for arr in arrays:
            self.layout.append(total)
            total = _aligned(total + arr.nbytes)
        self.weights = _Area(total)
        # gradients are the size of the weights; the rest (logits of an eval shard) gets room too.
        # Pages of an anonymous mapping cost nothing until they are written.
        self.results = [_Area(2 * total + (64 << 20)) for _ in range(n_workers)]
        ctx = multiprocessing.get_context("fork")
        self.conns, self.procs = [], []
        for area in self.results:
            parent_end, child_end = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(child_end, self.conns + [parent_end], model, self.weights,
                                                     self.layout, area),
                               name="zerollm-shard", daemon=True)
            proc.start()
            child_end.close()
            self.conns.append(parent_end)
            self.procs.append(proc)
        self.alive = True
        # workers end with their pool (garbage collected or at exit), not only on close()
        self._finalizer = weakref.finalize(self, _stop_workers, self.conns, self.procs)
        _POOLS.add(self)

    def matches(self, model):
        return self.alive and model is self.model and signature(model) == self.signature

    def _send_weights(self):
        named = weight_arrays(self.model)
        places = {name: offset for offset, (name, _) in zip(self.layout, named)}
        arrays = dict(named)

        def copy(name):
            arr = arrays[name]
            np.copyto(self.weights.view(places[name], arr.shape, arr.dtype), arr)
        by_name_in_parts(self.pool, arrays, copy)

    def map(self, fn, shards, seeds, local, copy):
        """[fn(replica_i, shard_i)] in shard order. ``local(i)`` computes shard i in this process (shard 0
        always; any other whose worker died). copy=False: arrays of the workers' results are views of
        shared memory, valid until the next call (enough for reducing them at once)."""
        from zerollm.engine import get_engine
        model = self.model
        self._send_weights()
        settings = (model.training, model.amp, model.grad_scale, get_engine())
        sent = []
        for i in range(1, len(shards)):
            conn = self.conns[i - 1]
            try:
                conn.send((fn, shards[i], seeds[i], settings))
                sent.append(i)
            except (OSError, EOFError):
                self.alive = False
        results, error = [None] * len(shards), None
        try:
            results[0] = local(0)
        except BaseException as err:       # noqa: BLE001 -- the workers' answers are read first
            error = err
        for i in range(1, len(shards)):
            if i in sent:
                try:
                    kind, payload = self.conns[i - 1].recv()
                except (EOFError, OSError):
                    self.alive = False
                except BaseException:  # KeyboardInterrupt while waiting: answers left unread in the pipes
                    self.alive = False  # would be taken for the next batch's; these workers are done
                    raise
                else:
                    if kind == "ok":
                        results[i] = _Unpacker(payload, self.results[i - 1], copy).load()
                        continue
                    error = error or pickle.loads(payload)
                    continue
            if error is None:          # its worker is gone: compute the shard here, as a thread would
                results[i] = local(i)
        if error is not None:
            raise error
        return results

    def memory_kib(self):
        """Each worker's peak memory growth since it was forked, in KiB (shared areas left out; None
        where Linux's /proc/self/clear_refs is not available): what the workers cost beyond this process."""
        out = []
        for conn in self.conns:
            try:
                conn.send("memory")
                out.append(conn.recv())
            except (OSError, EOFError):
                out.append(None)
        return out

    def close(self):
        self._finalizer()
        self.alive = False


_POOLS = weakref.WeakSet()


@atexit.register                   # registered after multiprocessing's own exit hook, so it runs before it
def _stop_all():
    for pool in list(_POOLS):
        pool.close()


def _stop_workers(conns, procs):
    for conn in conns:
        try:
            conn.send(None)
        except (OSError, EOFError):
            pass
    for conn, proc in zip(conns, procs):
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join()
        conn.close()
