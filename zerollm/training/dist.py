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
"""

import hashlib
import json
import os

from zerollm.io.errors import ZeroLLMError

# variables that MPI launchers set in every process they start (MPICH's Hydra, Open MPI, PMIx)
_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS")


class World:
    """The processes of one job: rank, size and the collective operations zerollm needs."""

    def __init__(self, comm=None):
        self.comm = comm
        self.rank = 0 if comm is None else comm.Get_rank()
        self.size = 1 if comm is None else comm.Get_size()
        self.talked = False      # has any collective call happened yet? (see report_error)

    @property
    def is_main(self):
        """Rank 0: the one process that prints, logs and writes checkpoints."""
        return self.rank == 0

    def allgather(self, value):
        """[value of rank 0, value of rank 1, ...] on every rank."""
        self.talked = True
        return [value] if self.comm is None else self.comm.allgather(value)

    def barrier(self):
        self.talked = True
        if self.comm is not None:
            self.comm.Barrier()

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


def report_error(show, error):
    """How the CLI reports an error under MPI. Before the ranks first talk to each other an error comes
    from checking the same command line on every rank: rank 0 shows it and every rank exits. A mismatch
    (RankMismatch) is found by all ranks together: the same. Any other error after that may have hit
    this rank alone, and the others would wait for it forever: show it with the rank, then abort all."""
    w = _world
    if w is None or w.size == 1:
        show(str(error))
        return
    if not w.talked or isinstance(error, RankMismatch):
        if w.is_main:
            show(str(error))
        return
    show(f"(rank {w.rank}) {error}")
    w.abort(1)


class RankMismatch(ZeroLLMError):
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
    """The global batch must split evenly over the ranks, so every rank has the same work."""
    if rows % world.size:
        lower, upper = rows - rows % world.size, rows + world.size - rows % world.size
        raise ZeroLLMError(f"{what} {rows} does not split over {world.size} ranks; use a multiple of "
                           f"{world.size} (e.g. {lower or world.size} or {upper}) or mpirun -n with a divisor of {rows}")


def _digest(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()
