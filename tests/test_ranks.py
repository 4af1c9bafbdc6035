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


def gpu_member(rank: int, uuid: str, host: str = "node-a", device: str = "cuda:0",
               name: str = "NVIDIA H100 80GB HBM3") -> dict:
    """What a rank says of its GPU when the ranks meet (faked: this machine has none)."""
    return {"rank": rank, "host": host, "device": device, "gpu": uuid, "gpu_name": name,
            "bf16": True}


def test_two_ranks_on_one_gpu_are_refused_by_its_uuid_naming_both():
    """Issue 30, point 3: every rank given its own CUDA_VISIBLE_DEVICES is cuda:0, so the
    ranks compare GPU UUIDs; the same UUID on two hosts is two GPUs."""
    from kiwb.workers.ranks import refuse_shared_gpus

    refuse_shared_gpus([gpu_member(0, "GPU-1"), gpu_member(1, "GPU-2"),
                        gpu_member(2, "GPU-1", host="node-b")])
    refuse_shared_gpus([{"rank": 0, "host": "a", "device": "cpu", "gpu": None},
                        {"rank": 1, "host": "a", "device": "cpu", "gpu": None}])  # cpu,cpu
    with pytest.raises(KiwbError) as refused:
        refuse_shared_gpus([gpu_member(0, "GPU-1"), gpu_member(1, "GPU-2"),
                            gpu_member(2, "GPU-1", device="cuda:3")])
    assert str(refused.value).startswith("ranks 0 and 2 are on one GPU (GPU-1 of node-a, as "
                                         "cuda:0 and cuda:3): give each rank its own GPU")


def test_a_scoring_jobs_ranks_draw_on_one_gpu_model():
    """Score sets are keyed by GPU model (issue 30, point 7): one job must not mix two."""
    from kiwb.workers.ranks import refuse_other_gpu_models

    refuse_other_gpu_models([gpu_member(0, "GPU-1"), gpu_member(1, "GPU-2")])
    with pytest.raises(KiwbError, match=r"ranks 0 and 1 score on other GPU models "
                                        r"\(NVIDIA H100 80GB HBM3, NVIDIA A100-SXM4-80GB\)"):
        refuse_other_gpu_models([gpu_member(0, "GPU-1"),
                                 gpu_member(1, "GPU-2", name="NVIDIA A100-SXM4-80GB")])


def test_one_gpu_named_twice_in_devices_is_refused_before_any_rank_starts():
    from kiwb.project.devices import device_list

    assert device_list("cpu,cpu") == ["cpu", "cpu"]  # CPU ranks share the cores on purpose
    assert device_list("cuda:0,cuda:1") == ["cuda:0", "cuda:1"]
    for given in ("cuda:0,cuda:0", "cuda,cuda", "cuda,cuda:1,cuda:0"):
        with pytest.raises(KiwbError, match=rf"--devices '{given}': cuda:0 is named twice"):
            device_list(given)


def test_a_configured_gpu_under_torchrun_with_several_local_ranks_is_refused(monkeypatch):
    """device = "cuda:1" in kiwb.toml once put every local rank of a machine on GPU 1."""
    monkeypatch.delenv("KIWB_RANK_DEVICE", raising=False)
    setup = RankSetup(rank=1, world_size=2, local_rank=1, spawned=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")  # one process per machine: its GPU as set
    assert rank_device_name(setup, None, "cuda:1") == "cuda:1"
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with pytest.raises(KiwbError, match=r"device = 'cuda:1' in kiwb.toml puts all 2 processes"):
        rank_device_name(setup, None, "cuda:1")
    assert rank_device_name(setup, ["cuda:0", "cuda:1"], "cuda:1") == "cuda:1"  # --devices wins
