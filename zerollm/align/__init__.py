"""align: from a language model to an assistant. The chat template, the post-training objectives (SFT,
reward models, DPO, distillation from a teacher), reinforcement learning (PPO, GRPO), tasks a program can check, the tools a model may call (align.tools:
the calculator and user tools), the guard of user code (align.guard: rewards' and tools' time limits), each stage's defaults and
objective builder (align.stages), and what a stage hands the one run recipe of zerollm.training.run
(align.stage).

May import every room below it, up to training."""
