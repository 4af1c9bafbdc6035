"""A GPU check of kiwb's CUDA paths, in minutes: run it first on a machine with a GPU.

    bash benchmarks/gpu_check.sh                 # on the GPU (cuda); ~5 minutes
    python benchmarks/gpu_check.py --device cpu  # the same steps on the CPU (a dry run)

On the quick demo project (built here, tiny real models) it checks, and prints as it goes:
  1. scoring, loop and replicate x float32, bfloat16, float16: finite scores, MC passes that
     differ from the deterministic one, eval mode restored, the same scores twice under a
     seed; texts/s for each and the ratio to the K x eval floor (one plain forward x (K+1));
  2. train, evaluate, export and predict under each [training] mixed_precision;
  3. a real out-of-memory recovery (a batch far too large), with the retry count;
  4. a student base saved in float16, trained under fp16 loss scaling;
  5. cuda:1 when a second GPU exists (nothing allocated on cuda:0);
  6. several ranks (issue 30): two torchrun ranks put on one GPU on purpose are refused by
     its UUID; this GPU's native bfloat16 and its score-set drawing key; with two GPUs, a
     two-rank NCCL training run, and a rank killed mid-run ending the job lost in a minute.
Exits 1 when a check fails; writes benchmarks/out/gpu_check.json.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's kiwb

import torch  # noqa: E402

PASSES = 16
FAILURES: list[str] = []


def check(condition: bool, what: str) -> None:
    print(f"  {'ok  ' if condition else 'FAIL'} {what}", flush=True)
    if not condition:
        FAILURES.append(what)


def kiwb(*args) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "kiwb", *map(str, args)], capture_output=True, text=True)
    if result.returncode != 0:
        FAILURES.append(f"kiwb {' '.join(map(str, args))}: {result.stderr.strip().splitlines()[-1:]}")
    return result


def demo(out: Path) -> Path:
    root = out / "demo"
    kiwb("demo", root, "--no-ui", "--quick")
    return root


def teacher_and_texts(root: Path, count: int):
    from kiwb.project.config import load_config
    from kiwb.workers.project_inputs import inspect_teachers
    from kiwb.workers.teachers import load_teacher

    config = load_config(root)
    teacher = inspect_teachers(config)[0]
    texts = [json.loads(line)["text"] for line in (root / "data" / "pool.jsonl").read_text().splitlines()]
    texts = (texts * (count // len(texts) + 1))[:count]
    return teacher, texts, load_teacher


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def scoring(root: Path, device: torch.device, results: dict) -> None:
    import numpy as np

    from kiwb.core.mc_dropout import deterministic_logits
    from kiwb.workers.shard_scoring import ScoringSettings, length_sorted_batches, score_texts

    print("1. scoring", flush=True)
    teacher, texts, load_teacher = teacher_and_texts(root, 2048 if device.type == "cuda" else 256)
    model, tokenizer = load_teacher(teacher, str(device))
    # The floor: K + 1 plain eval forwards of the same texts in the same length-sorted batches.
    encoded = tokenizer(texts, truncation=True, max_length=48)
    features = [{name: encoded[name][row] for name in encoded.keys()} for row in range(len(texts))]
    batches = [tokenizer.pad([features[row] for row in rows], return_tensors="pt").to(device)
               for rows in length_sorted_batches([len(f["input_ids"]) for f in features], 64)]
    with torch.inference_mode():
        deterministic_logits(model, batches[0])
        sync(device)
        started = time.perf_counter()
        for batch in batches:
            deterministic_logits(model, batch)
        sync(device)
    floor = len(texts) / (time.perf_counter() - started) / (PASSES + 1)
    for strategy in ("loop", "replicate"):
        for dtype in ("float32", "bfloat16", "float16"):
            settings = ScoringSettings(passes=PASSES, batch_size=64, max_length=48, strategy=strategy,
                                       dtype=dtype, seed=0)
            first = score_texts(model, tokenizer, texts, settings, device, shard_seed=1)
            sync(device)
            started = time.perf_counter()
            again = score_texts(model, tokenizer, texts, settings, device, shard_seed=1)
            sync(device)
            rate = len(texts) / (time.perf_counter() - started)
            name = f"{strategy} {dtype}"
            check(all(np.isfinite(values).all() for values in first.values()), f"{name}: finite scores")
            check(not np.allclose(first["mc_probs"], first["det_probs"]), f"{name}: MC passes differ")
            check(not model.training, f"{name}: eval mode restored")
            check(all(np.array_equal(first[k], again[k]) for k in first), f"{name}: reproducible under a seed")
            results["scoring"][name] = {"texts_per_s": round(rate, 1), "floor_ratio": round(floor / rate, 2)}
            print(f"     {name}: {rate:,.0f} texts/s, {floor / rate:.2f}x the K x eval floor", flush=True)


def set_mixed_precision(project: Path, precision: str) -> None:
    config = project / "kiwb.toml"
    text = re.sub(r"^mixed_precision = .*$", f'mixed_precision = "{precision}"', config.read_text(), flags=re.M)
    config.write_text(text)


PRECISIONS = ("no", "bf16", "fp16", "auto")


def training(root: Path, out: Path, device: torch.device, results: dict,
             precisions=PRECISIONS) -> None:
    print("2. train, evaluate, export and predict per mixed precision", flush=True)
    for precision in precisions:
        project = out / f"train-{precision}"
        shutil.rmtree(project, ignore_errors=True)
        shutil.copytree(root, project, ignore=shutil.ignore_patterns("runs", "exports"))
        set_mixed_precision(project, precision)
        started = time.perf_counter()
        trained = kiwb("train", project, "--run", "r", "--device", device, "--foreground")
        seconds = time.perf_counter() - started
        check(trained.returncode == 0 and not re.search(r"\bnan\b", trained.stderr.lower()),
              f"train under {precision}")
        evaluated = kiwb("evaluate", project, "--run", "r", "--json")
        accuracy = json.loads(evaluated.stdout)["accuracy"] if evaluated.returncode == 0 else None
        check(accuracy is not None, f"evaluate under {precision}: accuracy {accuracy}")
        exported = kiwb("export", project, "--run", "r", "--to", project / "student", "--force", "--foreground")
        check(exported.returncode == 0, f"export under {precision}")
        predicted = kiwb("predict", project / "student", "The striker scored twice in the derby")
        check(predicted.returncode == 0 and bool(predicted.stdout.strip()), f"predict under {precision}")
        results["training"][precision] = {"seconds": round(seconds, 1), "accuracy": accuracy}


def out_of_memory(root: Path, device: torch.device, results: dict) -> None:
    from kiwb.workers.runtime import FittedBatch
    from kiwb.workers.shard_scoring import ScoringSettings, score_texts

    print("3. out-of-memory recovery", flush=True)
    if device.type != "cuda":
        print("     skipped: needs CUDA", flush=True)
        return
    teacher, texts, load_teacher = teacher_and_texts(root, 1024)
    model, tokenizer = load_teacher(teacher, str(device))
    long_texts = [" ".join([text] * 40) for text in texts]  # 512 tokens each
    free, _ = torch.cuda.mem_get_info(device)
    # 1,024 texts x 64 passes in one replicated batch: hundreds of GB of attention maps
    batch = FittedBatch(len(long_texts))
    settings = ScoringSettings(passes=64, batch_size=batch.size, max_length=512, strategy="replicate",
                               dtype="float32", seed=0)
    scores = score_texts(model, tokenizer, long_texts, settings, device, shard_seed=0, batch=batch)
    check(batch.halvings > 0, f"halved {batch.halvings} times to {batch.size} texts ({free / 2**30:.0f} GiB free)")
    check(all(torch.isfinite(torch.from_numpy(v)).all() for v in scores.values()), "finite after the retries")
    results["out_of_memory"] = {"halvings": batch.halvings, "fitted": batch.size}


def half_saved_base(root: Path, out: Path, device: torch.device, results: dict) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    print("4. a student base saved in float16, trained under fp16", flush=True)
    base = out / "base-fp16"
    AutoModelForSequenceClassification.from_pretrained(root / "models" / "base", dtype=torch.float16).save_pretrained(base)
    AutoTokenizer.from_pretrained(root / "models" / "base").save_pretrained(base)
    project = out / "train-fp16-base"
    shutil.rmtree(project, ignore_errors=True)
    shutil.copytree(root, project, ignore=shutil.ignore_patterns("runs", "exports"))
    set_mixed_precision(project, "fp16")
    trained = kiwb("train", project, "--run", "r", "--student", base, "--device", device, "--foreground")
    check(trained.returncode == 0, "an fp16-saved base trains under fp16")
    results["fp16_saved_base"] = trained.returncode == 0


def second_gpu(root: Path, results: dict) -> None:
    from kiwb.workers.shard_scoring import ScoringSettings, score_texts

    print("5. cuda:1", flush=True)
    if torch.cuda.device_count() < 2:
        print("     skipped: one GPU", flush=True)
        return
    from kiwb.workers.runtime import prepare_device

    device = torch.device("cuda:1")
    prepare_device(device)
    teacher, texts, load_teacher = teacher_and_texts(root, 512)
    model, tokenizer = load_teacher(teacher, str(device))
    settings = ScoringSettings(passes=8, batch_size=64, max_length=48, strategy="loop", dtype="float32", seed=0)
    score_texts(model, tokenizer, texts, settings, device, shard_seed=0)
    check(torch.cuda.memory_allocated(0) == 0, "nothing allocated on cuda:0")
    results["cuda1"] = True


def ranks(root: Path, out: Path, results: dict) -> None:
    import os
    import signal

    from kiwb.project.paths import ProjectPaths
    from kiwb.project.store import Store
    from kiwb.workers.runtime import native_bf16
    from kiwb.workers.score import drawing_key

    print("6. several ranks", flush=True)
    device = torch.device("cuda:0")
    results["ranks"] = {"native_bf16": native_bf16(device),
                        "drawing": drawing_key(device, "bfloat16")}
    print(f"     native bfloat16: {native_bf16(device)}; drawing {drawing_key(device, 'bfloat16')}")
    project = out / "ranks"
    shutil.rmtree(project, ignore_errors=True)
    shutil.copytree(root, project, ignore=shutil.ignore_patterns("runs", "exports"))
    started = time.perf_counter()
    both_on_one = subprocess.run(  # every rank told cuda:0, as a per-rank env would do
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "kiwb", "--", "train", str(project), "--run", "one-gpu"],
        env={**os.environ, "KIWB_RANK_DEVICE": "cuda:0"}, capture_output=True, text=True,
        timeout=300)
    said = both_on_one.stdout + both_on_one.stderr
    check(both_on_one.returncode != 0 and "ranks 0 and 1 are on one GPU" in said,
          f"two ranks on one GPU refused in {time.perf_counter() - started:.0f}s")
    results["ranks"]["one_gpu_refusal"] = [line for line in said.splitlines()
                                           if "on one GPU" in line][:1]
    if torch.cuda.device_count() < 2:
        print("     two-GPU checks skipped: one GPU", flush=True)
        return
    started = time.perf_counter()
    trained = kiwb("train", project, "--run", "two", "--devices", "cuda:0,cuda:1")
    check(trained.returncode == 0, f"two ranks trained on NCCL in {time.perf_counter() - started:.0f}s")
    kiwb("train", project, "--run", "victim", "--epochs", "50", "--devices", "cuda:0,cuda:1",
         "--detach")
    with Store(ProjectPaths(project).store) as store:
        job = store.jobs.all()[-1]
    rank_log = ProjectPaths(project).logs / f"job-{job.id}.rank-1.log"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not (rank_log.exists() and "steps" in rank_log.read_text()):
        time.sleep(0.5)
    pid = int(re.search(r"pid (\d+)", rank_log.read_text()).group(1))
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    while time.monotonic() - killed < 120:
        with Store(ProjectPaths(project).store) as store:
            state = store.jobs.get(job.id)
        if not state.live:
            break
        time.sleep(0.5)
    seconds = time.monotonic() - killed
    check(state.status == "lost" and seconds < 60,
          f"a killed rank ended the NCCL job {state.status} in {seconds:.0f}s")
    results["ranks"]["killed_rank_s"] = round(seconds, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--checks", default="1,2,3,4,5,6",
                        help="which numbered checks to run (a short lease runs the missing ones)")
    parser.add_argument("--precisions", default=",".join(PRECISIONS),
                        help="check 2's mixed_precision settings")
    args = parser.parse_args()
    wanted = {int(number) for number in args.checks.split(",")}
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device here; run with --device cpu for a dry run")
    out = HERE / "out" / "gpu_check"
    out.mkdir(parents=True, exist_ok=True)
    results: dict = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                     "torch": torch.__version__, "scoring": {}, "training": {}}
    started = time.perf_counter()
    root = demo(out)
    steps = {1: lambda: scoring(root, device, results),
             2: lambda: training(root, out, device, results, args.precisions.split(",")),
             3: lambda: out_of_memory(root, device, results),
             4: lambda: half_saved_base(root, out, device, results),
             5: lambda: second_gpu(root, results) if device.type == "cuda" else None,
             6: lambda: ranks(root, out, results) if device.type == "cuda" else None}
    for number, step in steps.items():
        if number in wanted:
            step()
    results["failures"], results["seconds"] = FAILURES, round(time.perf_counter() - started, 1)
    (HERE / "out" / "gpu_check.json").write_text(json.dumps(results, indent=2))
    print(f"{len(FAILURES)} failure(s) in {results['seconds']:.0f}s; figures in benchmarks/out/gpu_check.json")
    for failure in FAILURES:
        print(f"  {failure}")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
