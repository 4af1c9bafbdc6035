"""The ranks' own collectives, in real processes: rank 0's watch (a started rank that dies, or
torchrun's SIGTERM while rank 0 is blocked in a collective, aborts the group and, when the
main thread stays blocked, records the ending and ends the process), the plan sent without
copies, and the gradient buckets."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import torch
from cli_helpers import kiwb_env

from kiwb.workers.train_ranks import gradient_buckets

WATCH = """
import json, signal, subprocess, sys, threading, time
from pathlib import Path
from kiwb.workers.collectives import collective
from kiwb.workers.rank_watch import RankWatch
from kiwb.workers.ranks import RankLost, SpawnedRank, lost_data

out = Path(sys.argv[1])
log = out.parent / "rank-1.log"
log.write_text("rank 1 of 2 on cpu\\n")
signal.signal(signal.SIGTERM, lambda *_: None)  # as the job's handler: it only sets a flag

def give_up(dead):
    out.write_text(json.dumps(lost_data(dead, "blocked")))

def until(condition, timeout=30.0):
    # waits for the condition, however loaded the machine: not for a time thought long enough
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()
"""


def run_script(tmp_path: Path, body: str) -> subprocess.Popen:
    script = tmp_path / "script.py"
    script.write_text(WATCH + textwrap.dedent(body))
    return subprocess.Popen([sys.executable, str(script), str(tmp_path / "ending.json")],
                            env=kiwb_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_a_started_rank_that_dies_while_rank_0_stays_blocked_ends_the_job_lost(tmp_path):
    """The main thread waits in a 'collective' that never returns (as NCCL's does for a dead
    peer): the watch aborts, waits its grace, records the rank's death, ends the process."""
    process = run_script(tmp_path, """
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        rank = SpawnedRank(1, "cpu", child, log)
        with RankWatch([rank], give_up, every_s=0.1, give_up_after_s=1.0):
            child.kill()
            collective(lambda: threading.Event().wait(60), "averaging the gradients")
        print("the main thread came back")
    """)
    started = time.monotonic()
    _, err = process.communicate(timeout=30)
    assert process.returncode == 1 and time.monotonic() - started < 15
    assert "rank 1 (cpu) killed by SIGKILL; aborting the ranks' collectives" in err
    ending = json.loads((tmp_path / "ending.json").read_text())
    assert ending["rank"] == 1 and "rank 1 (cpu) died (killed by SIGKILL)" in ending["error"]
    assert ending["log_tail"] == ["rank 1 of 2 on cpu"]


def test_a_main_thread_still_computing_is_not_given_up_on(tmp_path):
    """A rank died while rank 0 computes its own shard (longer than the grace): the watch
    aborts, but waits for the main thread to reach a collective, which then raises."""
    process = run_script(tmp_path, """
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        child.wait()
        rank = SpawnedRank(1, "cpu", child, log)
        child.returncode = -9  # as a rank killed by SIGKILL leaves it
        with RankWatch([rank], give_up, every_s=0.1, give_up_after_s=0.5) as watch:
            time.sleep(2.0)  # computing, in no collective
            try:
                collective(lambda: (_ for _ in ()).throw(RuntimeError("Connection closed")),
                           "gathering from the ranks")
            except RankLost as error:
                print("lost:", error, flush=True)
        print("aborted" if watch.aborted else "left well", flush=True)
    """)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0, out
    assert out.split("\n")[:2] == ["lost: gathering from the ranks: Connection closed", "aborted"]
    assert not (tmp_path / "ending.json").exists()


def test_a_rank_that_ends_well_or_a_main_thread_that_comes_back_gives_nothing_up(tmp_path):
    process = run_script(tmp_path, """
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        rank = SpawnedRank(1, "cpu", child, log)
        with RankWatch([rank], give_up, every_s=0.1, give_up_after_s=1.0) as watch:
            child.wait()
            time.sleep(0.5)
        print("aborted" if watch.aborted else "left well")
    """)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0 and out.strip() == "left well"
    assert not (tmp_path / "ending.json").exists()


def test_torchruns_sigterm_while_rank_0_waits_in_a_collective_aborts_the_group(tmp_path):
    """Under torchrun the agent's SIGTERM finds rank 0 blocked: its Python handler cannot run,
    but the wakeup pipe tells the watch, which aborts and, still blocked, gives up."""
    process = run_script(tmp_path, """
        with RankWatch([], give_up, torchrun=True, every_s=0.1, give_up_after_s=1.0):
            # said from inside the collective: the signal then finds the rank waiting there
            collective(lambda: print("in the collective", flush=True)
                       or threading.Event().wait(60), "averaging the gradients")
    """)
    assert process.stdout.readline().strip() == "in the collective"
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 1
    assert "torchrun ended this rank (SIGTERM) while it waited for the other ranks" in err
    assert "stopped answering" in json.loads((tmp_path / "ending.json").read_text())["error"]


def test_kiwb_cancels_sigterm_while_rank_0_waits_is_left_to_the_job(tmp_path):
    """`kiwb cancel` records its request before it signals: a wait for a rank's long shard
    then ends as it would have, and the job stops at its next round."""
    process = run_script(tmp_path, """
        with RankWatch([], give_up, torchrun=True, cancelled=lambda: True, every_s=0.1,
                       give_up_after_s=1.0) as watch:
            # in the collective until the watch has read the signal and decided
            collective(lambda: print("in the collective", flush=True)
                       or until(lambda: watch.sigterms_left), "gathering from the ranks")
        print("aborted" if watch.aborted else f"left well, {watch.sigterms_left} read",
              flush=True)
    """)
    assert process.stdout.readline().strip() == "in the collective"
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0 and out.strip() == "left well, 1 read"
    assert not (tmp_path / "ending.json").exists()


def test_a_sigterm_outside_a_collective_is_the_jobs_own_cancel(tmp_path):
    """A SIGTERM while rank 0 computes is a cancel, handled by the job at its next step: the
    watch leaves the group alone."""
    process = run_script(tmp_path, """
        with RankWatch([], give_up, torchrun=True, every_s=0.1, give_up_after_s=1.0) as watch:
            print("computing", flush=True)
            until(lambda: watch.sigterms_left)  # computing until the watch has read the signal
        print("aborted" if watch.aborted else f"left well, {watch.sigterms_left} read",
              flush=True)
    """)
    assert process.stdout.readline().strip() == "computing"
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0 and out.strip() == "left well, 1 read"


TRANSFER = """
import os, sys, pickle, torch, torch.distributed as dist
from datetime import timedelta
from kiwb.workers.object_transfer import receive_object, send_object

rank, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
store = dist.TCPStore("127.0.0.1", port, 2, is_master=rank == 0, timeout=timedelta(seconds=60))
dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
plan = {"texts": ["één", "two words", ""] * 3, "targets": torch.arange(12.0).reshape(4, 3),
        "mask": torch.tensor([True, False, True]), "half": torch.tensor([1.5, -2.0]).half(),
        "scalar": torch.tensor(7), "empty": torch.zeros(0, 5), "nested": [(1, {"x": torch.ones(2)})],
        "strided": torch.arange(10)[::3]}
if rank == 0:
    send_object(plan, "sending the plan")
else:
    got = receive_object("waiting for the plan")
    with open(out, "wb") as file:
        pickle.dump((plan, got), file)
dist.destroy_process_group()
"""


def test_the_plan_arrives_whole_with_its_tensors_sent_beside_the_pickle(tmp_path):
    from kiwb.workers.ranks import free_port

    script = tmp_path / "transfer.py"
    script.write_text(TRANSFER)
    port, out = free_port(), tmp_path / "got.pkl"
    ranks = [subprocess.Popen([sys.executable, str(script), str(rank), str(port), str(out)],
                              env=kiwb_env()) for rank in (0, 1)]
    assert [rank.wait(timeout=60) for rank in ranks] == [0, 0]
    import pickle

    sent, got = pickle.loads(out.read_bytes())
    assert sent.keys() == got.keys() and got["texts"] == sent["texts"]
    for name in ("targets", "mask", "half", "scalar", "empty", "strided"):
        assert got[name].dtype == sent[name].dtype and torch.equal(got[name], sent[name]), name
    assert got["nested"][0][0] == 1 and torch.equal(got["nested"][0][1]["x"], torch.ones(2))


def test_gradients_go_in_buckets_of_at_most_the_limit_a_large_one_alone():
    grads = [torch.zeros(10), torch.zeros(10), torch.zeros(30), torch.zeros(5),
             torch.zeros(4, dtype=torch.float16), torch.zeros(3)]
    # 40-byte float32 tensors, limit 100 bytes: 40+40, then 120 alone, then 20, then the
    # float16 one apart from its float32 neighbours, then 12
    sizes = [[len(grad) for grad in bucket] for bucket in gradient_buckets(grads, 100)]
    assert sizes == [[10, 10], [30], [5], [4], [3]]
    assert [len(bucket) for bucket in gradient_buckets(grads[:4], 10**6)] == [4]


AVERAGE = """
import sys, torch, torch.distributed as dist
from datetime import timedelta
from kiwb.workers import train_ranks
from kiwb.workers.ranks import RankSetup

rank, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
store = dist.TCPStore("127.0.0.1", port, 2, is_master=rank == 0, timeout=timedelta(seconds=60))
dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
train_ranks.BUCKET_BYTES = 64  # buckets: first.weight alone, first.bias + second.weight, second.bias

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Linear(4, 5), torch.nn.Linear(5, 2)
        self.register_buffer("offset", torch.full((3,), float(rank)))

torch.manual_seed(rank)  # each rank its own weights and buffer before the broadcast
net = Net()
ranks = train_ranks.TrainRanks(RankSetup(rank, 2, rank, spawned=True), torch.device("cpu"),
                               train_ranks.tensor_group(torch.device("cpu"), 30))
assert ranks.wrap(net) is net
for number, param in enumerate(net.parameters()):  # rank r's gradient: (number + 1) * (r + 1)
    param.grad = torch.full_like(param, (number + 1.0) * (rank + 1))
if rank == 1:
    net.second.bias.grad = None  # a part no row reached here: it takes part with zeros
ranks.average_gradients(net)
torch.save({"state": net.state_dict(), "grads": [p.grad for p in net.parameters()]}, out)
dist.destroy_process_group()
"""


def test_the_ranks_share_rank_0s_weights_and_buffers_and_average_gradients_in_buckets(tmp_path):
    """Issue 30, points 4 and 5: without DistributedDataParallel, wrap gives every rank rank 0's
    weights and buffers once, and the gradients are averaged in place, bucket by bucket."""
    from kiwb.workers.ranks import free_port

    script = tmp_path / "average.py"
    script.write_text(AVERAGE)
    port = free_port()
    outs = [tmp_path / f"rank-{rank}.pt" for rank in (0, 1)]
    ranks = [subprocess.Popen([sys.executable, str(script), str(rank), str(port), str(outs[rank])],
                              env=kiwb_env()) for rank in (0, 1)]
    assert [rank.wait(timeout=60) for rank in ranks] == [0, 0]
    zero, one = (torch.load(out) for out in outs)
    assert all(torch.equal(zero["state"][name], one["state"][name]) for name in zero["state"])
    assert torch.equal(one["state"]["offset"], torch.zeros(3))  # rank 0's buffer
    # the mean of (n + 1) * 1 and (n + 1) * 2 is 1.5 (n + 1); the last bias: (4 * 1 + 0) / 2
    expected = [1.5, 3.0, 4.5, 2.0]
    for got in (zero["grads"], one["grads"]):
        assert [float(grad.flatten()[0]) for grad in got] == expected
        assert all(bool((grad == grad.flatten()[0]).all()) for grad in got)
