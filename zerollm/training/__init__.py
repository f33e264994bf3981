"""training: the one loop of every stage. The Trainer, the objective contract and the language-model
objective, AdamW and the schedule, thread and MPI shards, checkpoints with exact resume, zerollm's own model
directory and every saved model read back (modeldir), the run log,
presets, the plan of a run, and the one run recipe that `zerollm train` and every post-training stage go
through (run.run_recipe).

May import every room below it: io, engine, tokenizers, nn, model, data, generation."""
