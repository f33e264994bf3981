"""Measuring models the way the field does: bits per byte (bpb), log-likelihoods and multiple choice
(loglik), the lm-evaluation-harness model (harness, lmeval_tasks) and its offline tasks (taskfiles),
and the report page (report). Nothing is imported here: harness needs lm_eval, which is optional.
"""
