"""What tests/conftest.py sets up for every test."""

import torch


def test_torch_runs_on_one_thread():
    # two pytest-xdist workers on two cores, each with a torch pool of one thread per core, made every torch
    # op wait for the other worker's: the torch-heavy files took twice the CPU
    assert torch.get_num_threads() == 1
