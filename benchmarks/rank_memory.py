"""What several ranks cost a training job in memory, before and after issue 30 (points 5, 8).

    python benchmarks/rank_memory.py            # ~2 minutes on 2 CPU cores

Each variant runs as two fresh gloo processes on this machine, one after the other, and
reads each process's peak resident memory (ru_maxrss) just before the part measured and
after it, so the figure is what that part added to the process's peak:
- gradients: three training steps of all-MiniLM-L6-v2 with a 57-class head (batch 32 x 128
  tokens) on each rank, gradients already allocated by a warm-up step. Before: the model
  under DistributedDataParallel (broadcast_buffers=False), every backward under no_sync,
  then one flat all-reduce of every gradient, as kiwb did up to c3dc3f7 (kept below as the
  baseline). After: TrainRanks.wrap (a broadcast of the weights) and average_gradients
  (in place, in buckets of 25 MB).
- plan: rank 0 sends the others a training plan of 100,000 texts (the Debian package
  descriptions of ../shared/data, each made a distinct string) with (n, 57) float32 targets
  and (n,) weights. Before: torch.distributed.broadcast_object_list. After:
  kiwb.workers.object_transfer.send_object.
Writes benchmarks/out/rank_memory/results.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out" / "rank_memory"
DATA = HERE.parent.parent / "shared" / "data" / "debian-packages.jsonl.gz"
VARIANTS = ("gradients-ddp", "gradients-kiwb", "plan-pickled", "plan-kiwb")
POOL, LABELS, STEPS = 100_000, 57, 3


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def worker(variant: str, rank: int, port: int, out: Path) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # two ranks on two cores
    store = dist.TCPStore("127.0.0.1", port, 2, is_master=rank == 0,
                          timeout=timedelta(seconds=120))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2,
                            timeout=timedelta(minutes=10))
    figures = (gradients if variant.startswith("gradients") else plan)(variant, rank)
    dist.destroy_process_group()
    out.write_text(json.dumps(figures))


def gradients(variant: str, rank: int) -> dict:
    import torch
    from transformers import AutoModelForSequenceClassification

    sys.path.insert(0, str(HERE))
    from debian8 import minilm_path

    from kiwb.workers.ranks import RankSetup
    from kiwb.workers.train_ranks import TrainRanks

    torch.manual_seed(rank)
    model = AutoModelForSequenceClassification.from_pretrained(minilm_path(), num_labels=LABELS)
    model.train()
    ids = torch.randint(1000, 20000, (32, 128))
    labels = torch.randint(0, LABELS, (32,))

    def backward() -> None:
        model(input_ids=ids, labels=labels).loss.backward()

    backward()  # gradients exist before the reading, in both variants
    before, started = peak_mb(), time.perf_counter()
    if variant == "gradients-ddp":
        ddp = ddp_wrap(model)
        for _ in range(STEPS):
            with ddp.no_sync():
                ddp(input_ids=ids, labels=labels).loss.backward()
            flat_average(model)
    else:
        ranks = TrainRanks(RankSetup(rank, 2, rank, spawned=True), torch.device("cpu"))
        ranks.wrap(model)
        for _ in range(STEPS):
            backward()
            ranks.average_gradients(model)
    seconds = (time.perf_counter() - started) / STEPS
    params = sum(param.numel() * param.element_size() for param in model.parameters())
    return {"added_peak_mb": round(peak_mb() - before, 1), "peak_mb": round(peak_mb(), 1),
            "parameters_mb": round(params / 2**20, 1), "seconds_per_step": round(seconds, 3)}


def ddp_wrap(model):
    """The baseline: how kiwb wrapped the model up to c3dc3f7."""
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, broadcast_buffers=False)


def flat_average(model) -> None:
    """The baseline: kiwb's averaging up to c3dc3f7, one flat copy of every gradient."""
    import torch.distributed as dist
    from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    grads = [param.grad for param in model.parameters() if param.requires_grad]
    flat = _flatten_dense_tensors(grads)
    dist.all_reduce(flat)
    flat /= 2
    for grad, averaged in zip(grads, _unflatten_dense_tensors(flat, grads), strict=True):
        grad.copy_(averaged)


def plan(variant: str, rank: int) -> dict:
    import torch
    import torch.distributed as dist

    from kiwb.workers.object_transfer import receive_object, send_object

    value = None
    if rank == 0:
        with gzip.open(DATA, "rt", encoding="utf-8") as lines:
            texts = [json.loads(line)["text"] for line in lines]
        # distinct strings, as a real pool's are (pickle would send a repeated one once)
        texts = [f"{texts[i % len(texts)]} ({i})" for i in range(POOL)]
        generator = torch.Generator().manual_seed(0)
        value = {"texts": texts,
                 "targets": torch.rand(POOL, LABELS, generator=generator),
                 "weights": torch.rand(POOL, generator=generator)}
    before, started = peak_mb(), time.perf_counter()
    if variant == "plan-pickled":
        holder = [value]
        dist.broadcast_object_list(holder, src=0)
        value = holder[0]
    elif rank == 0:
        send_object(value, "sending the plan")
    else:
        value = receive_object("waiting for the plan")
    seconds = time.perf_counter() - started
    text_mb = sum(len(text.encode()) for text in value["texts"]) / 2**20
    return {"added_peak_mb": round(peak_mb() - before, 1), "peak_mb": round(peak_mb(), 1),
            "texts": len(value["texts"]), "text_mb": round(text_mb, 1),
            "tensor_mb": round((value["targets"].numel() + value["weights"].numel()) * 4 / 2**20, 1),
            "seconds": round(seconds, 2)}


def run_variant(variant: str) -> list[dict]:
    from kiwb.workers.ranks import free_port

    port, outs = free_port(), [OUT / f"{variant}.rank-{rank}.json" for rank in (0, 1)]
    processes = [subprocess.Popen([sys.executable, __file__, "--worker", variant, str(rank),
                                   str(port), str(outs[rank])]) for rank in (0, 1)]
    if [process.wait(timeout=900) for process in processes] != [0, 0]:
        raise SystemExit(f"{variant}: a rank failed")
    return [json.loads(out.read_text()) for out in outs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=4, metavar=("VARIANT", "RANK", "PORT", "OUT"))
    args = parser.parse_args()
    if args.worker:
        variant, rank, port, out = args.worker
        worker(variant, int(rank), int(port), Path(out))
        return
    OUT.mkdir(parents=True, exist_ok=True)
    results = {}
    for variant in VARIANTS:
        results[variant] = run_variant(variant)
        print(variant, json.dumps(results[variant]), flush=True)
    (OUT / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
