"""Where a process stands among a job's ranks, worked out by hand: the environment torchrun
sets, each rank's device, mixed devices refused, and each rank's share of a training batch."""

from __future__ import annotations

import pytest
import torch

from kiwb.errors import KiwbError
from kiwb.workers.ranks import RankSetup, launched_rank, rank_device_name, refuse_mixed_devices
from kiwb.workers.train_ranks import TrainRanks


def test_the_environment_says_where_a_process_stands(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "KIWB_SPAWNED_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert launched_rank() is None  # alone
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    assert launched_rank() is None  # torchrun with one process: alone too
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert launched_rank() == RankSetup(rank=3, world_size=4, local_rank=1, spawned=False)
    assert not launched_rank().leads


def test_a_ranks_device_is_its_own_then_its_local_entry_then_the_project_setting(monkeypatch):
    monkeypatch.delenv("KIWB_RANK_DEVICE", raising=False)
    setup = RankSetup(rank=3, world_size=4, local_rank=1, spawned=False)
    assert rank_device_name(setup, ["cuda:2", "cuda:5"], "auto") == "cuda:5"
    assert rank_device_name(setup, None, "cpu") == "cpu"
    with pytest.raises(KiwbError, match="local rank 1, but --devices names 1 device"):
        rank_device_name(setup, ["cuda:0"], "auto")
    monkeypatch.setenv("KIWB_RANK_DEVICE", "cuda:7")  # a rank a worker started
    assert rank_device_name(setup, ["cuda:2", "cuda:5"], "auto") == "cuda:7"


def test_devices_all_under_torchrun_is_each_machines_gpus_read_by_every_rank(monkeypatch):
    """Issue 30, point 2: each torchrun rank expands `all` before taking its local entry (on
    this CPU machine the two GPUs are the CUDA runtime's answers, patched)."""
    monkeypatch.delenv("KIWB_RANK_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    for local_rank in (0, 1):
        setup = RankSetup(rank=local_rank + 2, world_size=4, local_rank=local_rank,
                          spawned=False)
        assert rank_device_name(setup, ["all"], "auto") == f"cuda:{local_rank}"


def test_a_local_rank_beyond_the_machines_gpus_is_refused_not_doubled_up(monkeypatch):
    """Issue 30, point 3: local rank 2 on a two-GPU machine once took cuda:0 (a modulo)."""
    monkeypatch.delenv("KIWB_RANK_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    setup = RankSetup(rank=2, world_size=3, local_rank=2, spawned=False)
    assert rank_device_name(RankSetup(1, 3, 1, False), None, "auto") == "cuda:1"
    with pytest.raises(KiwbError, match="local rank 2, but this machine has 2 GPU"):
        rank_device_name(setup, None, "auto")


def test_ranks_on_two_kinds_of_device_are_refused():
    refuse_mixed_devices(["cuda:0", "cuda:1", "cuda"])
    refuse_mixed_devices(["cpu", "cpu"])
    with pytest.raises(KiwbError, match="cpu and cuda devices"):
        refuse_mixed_devices(["cuda:0", "cpu"])


def share(rank: int, world: int, rows: list[int]):
    ranks = TrainRanks(RankSetup(rank, world, rank, spawned=True), torch.device("cpu"))
    mine, factor = ranks.share(torch.tensor(rows))
    return mine.tolist(), factor


def test_each_rank_takes_every_world_size_th_row_and_weighs_its_share():
    assert share(0, 2, list(range(10))) == ([0, 2, 4, 6, 8], 1.0)
    assert share(1, 2, list(range(10))) == ([1, 3, 5, 7, 9], 1.0)
    # 3 rows on 2 ranks: 2/3 and 1/3 of the batch, times 2 ranks (their average is the mean)
    assert share(0, 2, [7, 8, 9]) == ([7, 9], pytest.approx(4 / 3))
    assert share(1, 2, [7, 8, 9]) == ([8], pytest.approx(2 / 3))
    # one row on 2 ranks: the second runs the row at weight 0, to take part in the average
    assert share(1, 2, [7]) == ([7], 0.0)


def test_the_scaled_shares_average_to_the_batch_mean():
    losses = torch.tensor([0.5, 1.0, 2.0, 4.0, 8.0])  # per row
    world = 3
    scaled = []
    for rank in range(world):
        mine, factor = share(rank, world, list(range(5)))
        scaled.append(factor * float(losses[mine].mean()))
    assert sum(scaled) / world == pytest.approx(float(losses.mean()))
