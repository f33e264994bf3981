"""Data parallelism across processes and machines, over MPI (mpi4py; MPICH from a pip wheel).

    mpirun -n 2 zerollm train --preset shakespeare-cpu --out runs/mpi          # two ranks
    mpirun -n 2 zerollm train ... --threads 2                                    # two threads in each

Every rank builds the same model from the same seed and draws the same global batch from the same
generator. The batch is cut into ranks x threads shards of rows; rank r computes shards
r*threads .. r*threads + threads - 1, and then every rank gathers EVERY shard's loss and gradients and
adds them in shard order, exactly as one process with ranks x threads threads would (zerollm.training.parallel).
So each rank applies the same AdamW step to the same numbers, and the losses are bit-identical to one
process run with --threads equal to ranks x threads. Rank 0 alone writes logs and checkpoints.

Gathering every shard (rather than a faster all-reduce whose order of additions depends on the network)
costs memory for ranks x threads gradient copies: nothing for the models this project trains.

Ranks that disagree stop together, within seconds (``check_command``, ``report_error``):
    1. every rank parses its command line, then all of them compare, in the job's first collective call,
       whether any rank failed (then every rank exits with the first failing rank's one line) and a
       fingerprint of the command: its arguments, the ZEROLLM_ variables that change results, and the
       SHA-256 of every file it names (so ranks started with different --data files are told so);
    2. an error every rank finds in the same collective call (a batch that does not split over the
       ranks, ranks that disagree: ``JobError``) is raised on every rank and printed by rank 0; every rank
       exits normally, so mpirun passes on everything rank 0 wrote;
    3. any other error, which may have hit one rank alone while the others wait for it, ends the whole
       job at once (MPI_Abort) with that rank's message: rank 0 reports at once; another rank waits GRACE
       seconds first, so that an error every rank meets is printed once, by rank 0.
"""

import hashlib
import json
import os
import sys
import time

from zerollm.io.errors import ZeroLLMError
from zerollm.io.fileio import NotRegularFile, sha256_file

# variables that MPI launchers set in every process they start (MPICH's Hydra, Open MPI, PMIx)
_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS")


# A waiting rank first polls for SPIN seconds: ranks on idle cores arrive within a millisecond of each
# other, and a sleep there would only add its wake-up time to every step. A longer wait (the other rank
# is descheduled, or rank 0 writes a checkpoint) sleeps, in pauses that double up to a millisecond.
_SPIN, _FIRST_PAUSE, _LONGEST_PAUSE = 2e-3, 5e-5, 1e-3
WAITS = ("sleep", "spin")


def mpi_wait(environ=None):
    """How a rank waits for the others in a collective call: ZEROLLM_MPI_WAIT, 'sleep' (default) or 'spin'."""
    value = (os.environ if environ is None else environ).get("ZEROLLM_MPI_WAIT", "sleep").strip().lower()
    if value not in WAITS:
        raise ZeroLLMError(f"ZEROLLM_MPI_WAIT={value!r} is not a way to wait; use one of: {', '.join(WAITS)}")
    return value


class World:
    """The processes of one job: rank, size and the collective operations zerollm needs."""

    def __init__(self, comm=None):
        self.comm = comm
        self.rank = 0 if comm is None else comm.Get_rank()
        self.size = 1 if comm is None else comm.Get_size()
        self.polite = comm is not None and mpi_wait() == "sleep"

    @property
    def is_main(self):
        """Rank 0: the one process that prints, logs and writes checkpoints."""
        return self.rank == 0

    def allgather(self, value):
        """[value of rank 0, value of rank 1, ...] on every rank."""
        if self.comm is None:
            return [value]
        self._arrive()
        return self.comm.allgather(value)

    def barrier(self):
        if self.comm is not None:
            self._arrive()
            self.comm.Barrier()

    def _arrive(self):
        """Wait until every rank has reached this collective call, sleeping rather than spinning.

        MPICH waits in a busy loop: a rank that finishes its shard first spins at full speed until the
        others arrive. On a quiet machine that costs nothing, since each rank has its own core; on a busy
        one the spinning rank takes CPU time that the rank it waits for needs (docs/distributed.md
        measures it). So the ranks first meet in a non-blocking barrier, polled for a moment and then
        with short sleeps, and the collective itself starts with everyone present.
        ZEROLLM_MPI_WAIT=spin keeps MPI's own wait.
        """
        if self.polite:
            request, pause = self.comm.Ibarrier(), _FIRST_PAUSE
            spin_until = time.perf_counter() + _SPIN
            while not request.Test():
                if time.perf_counter() > spin_until:
                    time.sleep(pause)
                    pause = min(2 * pause, _LONGEST_PAUSE)

    def check_same(self, fingerprint, what):
        """Stop every rank (with one line on rank 0) unless all ranks hold the same ``fingerprint``."""
        if self.comm is None:
            return
        prints = self.allgather(_digest(fingerprint))
        odd = [r for r, p in enumerate(prints) if p != prints[0]]
        if odd:
            raise RankMismatch(f"ranks {odd} started with other {what} than rank 0; start every rank with the "
                               "same command, data and files (mpirun -n N zerollm ...)")

    def abort(self, code):
        """End every rank at once (an error one rank met alone would otherwise leave the others waiting)."""
        if self.comm is not None and self.size > 1:
            self.comm.Abort(code)


GRACE = 2.0      # seconds a rank other than 0 waits before it reports an error and ends the job
# mpirun's proxy copies a rank's stderr to mpirun's own; MPI_Abort tears the job down at once, and a line
# still in that pipe is lost (seen once in CI on a loaded machine: the error line and MPICH's own
# "Abort(1)" line both missing). The rank that reports waits this long before it aborts.
FORWARD = 0.5


def report_error(show, error):
    """How the CLI reports an error under MPI. A JobError (a mismatch, a batch that does not split) is
    found by all ranks together: rank 0 shows it and every rank exits. Any other error may have hit this
    rank alone, and the others would wait for it forever: show it and end every rank at once (MPI_Abort,
    FORWARD seconds after the line); a rank other than 0 first gives rank 0 GRACE seconds to report the
    same error (then only rank 0's line is printed)."""
    w = _world
    if w is None or w.size == 1:
        show(str(error))
        return
    if isinstance(error, JobError):
        if w.is_main:
            show(str(error))
        return
    if not w.is_main:
        time.sleep(GRACE)
    show(str(error) if w.is_main else f"(rank {w.rank}) {error}")
    time.sleep(FORWARD)
    w.abort(1)


# variables that change what a run computes (ZEROLLM_MEMORY_LIMIT is each machine's own)
_RESULT_VARS = ("ZEROLLM_ENGINE", "ZEROLLM_DOCS_TEST")


def command_fingerprint(argv, args):
    """What every rank must agree on before it starts: the command line, the ZEROLLM_ variables that
    change results, and the SHA-256 of every file the parsed arguments name."""
    files = {}
    for name, value in sorted(vars(args).items()):
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, str) and os.path.isfile(item):
                files[f"{name}={item}"] = _file_digest(item)
    return {"argv": [str(a) for a in argv], "env": {k: os.environ.get(k) for k in _RESULT_VARS}, "files": files}


def check_command(prog, argv, args, failure):
    """The job's first collective call, right after every rank parsed its command line (``args``; None where
    parsing failed with ``failure`` = (exit code, its one line)). Returns None when every rank may go on,
    else the exit code for every rank (rank 0 has printed the reason)."""
    w = world()
    if w.size == 1:
        return None if failure is None else failure[0]
    mine = (failure, None if args is None else _digest(command_fingerprint(argv, args)))
    every = w.comm.allgather(mine)
    failed = [(r, f) for r, (f, _) in enumerate(every) if f is not None]
    if failed:
        rank, (code, message) = failed[0]
        if w.is_main:
            print(message if rank == 0 else f"(rank {rank}) {message}", file=sys.stderr, flush=True)
        return code
    odd = [r for r, (_, p) in enumerate(every) if p != every[0][1]]
    if odd:
        if w.is_main:
            print(f"{prog}: error: ranks {odd} "
                  "started with other settings (command line, data files or ZEROLLM_ variables) than rank 0; "
                  "start every rank with the same command, data and files (mpirun -n N zerollm ...)",
                  file=sys.stderr, flush=True)
        return 1
    return None


def _file_digest(path):
    try:
        return sha256_file(path)
    except OSError as err:
        return f"unreadable: {err.strerror}"
    except NotRegularFile:              # it became a pipe after isfile(): every rank sees the same
        return "not a regular file"


class JobError(ZeroLLMError):
    """An error every rank raises together, after a collective call found it; printed by rank 0 only,
    and no rank aborts the job."""


class RankMismatch(JobError):
    """Ranks disagree about their inputs; raised on every rank, printed by rank 0 only."""


SINGLE = World()
_world = None


def launched_by_mpi(environ=None):
    """True when an MPI launcher started this process as one of several."""
    env = os.environ if environ is None else environ
    for var in _SIZE_VARS:
        try:
            if int(env.get(var, "1")) > 1:
                return True
        except ValueError:
            continue
    return False


def world():
    """This process's World: several ranks under mpirun -n N (N > 1), otherwise a world of one."""
    global _world
    if _world is not None:
        return _world
    if not launched_by_mpi():
        _world = SINGLE
        return _world
    try:
        from mpi4py import MPI
    except ImportError:
        raise ZeroLLMError('started by mpirun, but mpi4py is not installed: pip install "zerollm[mpi]" '
                           "(mpi4py and the mpich wheel, which also brings mpirun)") from None
    _world = World(MPI.COMM_WORLD)
    return _world


def check_divisible(rows, world, what="--batch-size"):
    """The global batch must split evenly over the ranks, so every rank has the same work. A collective
    call: every rank checks the batch of rank 0 (and that they all have the same), and raises together."""
    every = world.allgather(rows)
    if any(r != every[0] for r in every):
        raise RankMismatch(f"ranks {[i for i, r in enumerate(every) if r != every[0]]} have another {what} "
                           f"than rank 0 ({every[0]}); start every rank with the same command and run directory")
    if rows % world.size:
        lower, upper = rows - rows % world.size, rows + world.size - rows % world.size
        raise JobError(f"{what} {rows} does not split over {world.size} ranks; use a multiple of "
                       f"{world.size} (e.g. {lower or world.size} or {upper}) or mpirun -n with a divisor of {rows}")


def _digest(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()
