"""``zerollm distill``: train a small student on a bigger teacher's next-token distributions.

    zerollm distill --teacher runs/big --preset tiny --data tang --out runs/student
    zerollm distill --teacher runs/big --init runs/small --data poems.txt --divergence jsd --beta 0.5 \\
                    --ce-weight 0.5 --on-policy 0.5 --out runs/student
    zerollm distill --out runs/student --resume

The teacher (--teacher RUN, --hf DIR or --gguf FILE) is opened by zerollm.interop.opening and runs forward
only; the student is a zerollm run (--init) or a new model of a preset's size (--preset, the model flags on
top), on the teacher's tokenizer. The losses are zerollm.nn.distill's, the objective
zerollm.align.objectives.distill's; the run (inputs copied into RUN/inputs/, resume, threads, MPI, LoRA on
the student) is the one every post-training command shares (zerollm/align/stage.py).
"""

import os

from zerollm.align.stage import add_stage_arguments, run_stage
from zerollm.align.stages import DISTILL as STAGE
from zerollm.data import corpora
from zerollm.model.config import GPTConfig
from zerollm.training.flags import add_config_flags
from zerollm.training.presets import PRESETS


def add_arguments(p):
    teacher = p.add_mutually_exclusive_group()
    teacher.add_argument("--teacher", metavar="RUN", help="the teacher: a zerollm run, checkpoint or model directory")
    teacher.add_argument("--hf", metavar="DIR", help="the teacher: a Hugging Face model directory")
    teacher.add_argument("--gguf", metavar="FILE", help="the teacher: a GGUF file")
    student = p.add_mutually_exclusive_group()
    student.add_argument("--init", metavar="DIR", help="the student: a zerollm run or checkpoint directory")
    student.add_argument("--preset", choices=sorted(PRESETS), help="the student: a new model of this preset's "
                         "size (the model flags below change it), on the teacher's tokenizer")
    add_stage_arguments(p, STAGE)
    add_config_flags(p, GPTConfig, skip={"vocab_size"})


def run(args):
    if args.data in corpora.CORPORA and not os.path.exists(args.data):      # a corpus that ships with zerollm
        args.data = str(corpora.path(args.data))
    return run_stage(args, STAGE)
