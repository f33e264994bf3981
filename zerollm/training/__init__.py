"""training: the one loop of every stage. The Trainer, the objective contract and the language-model
objective, AdamW and the schedule, thread and MPI shards, checkpoints with exact resume, the run log,
presets and the plan of a run.

May import every room below it: io, engine, tokenizers, nn, model, data, generation."""
