"""``zerollm sft``: supervised fine-tuning of a checkpoint (or a Hugging Face model) on prompt/completion data.

    zerollm sft --init runs/tang --data acrostic-train.jsonl --eval-data acrostic-heldout.jsonl \\
                --task acrostic --out runs/tang-sft
    zerollm sft --out runs/tang-sft --resume                 # continue after Ctrl-C or a crash

The tokenizer gets the chat template's special tokens (and, for a char tokenizer, any character of the
data it lacks), the model the matching new embedding rows (zerollm.data.chat); the run directory and every
checkpoint hold that extended tokenizer, so ``zerollm sample`` and ``zerollm tasks eval`` work on it.
The run itself (flags, inputs copied into RUN/inputs/, resume) is the one every post-training command
shares (zerollm/align/stage.py); SFT's own settings are SFTConfig (zerollm/align/objectives/sft.py), its
defaults and objective builder the Stage zerollm.align.stages.SFT.
"""

from zerollm.align.stage import add_stage_arguments, run_stage
from zerollm.align.stages import SFT as STAGE


def add_arguments(p):
    add_stage_arguments(p, STAGE)


def run(args):
    return run_stage(args, STAGE)
