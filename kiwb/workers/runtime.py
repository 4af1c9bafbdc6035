"""Device, precision and seeding choices shared by the workers."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch

from kiwb.console import console
from kiwb.errors import KiwbError
from kiwb.kinds import DEFAULT_KIND, kind_named
from kiwb.project.devices import check_device
from kiwb.project.padding import unpaddable

Result = TypeVar("Result")

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def load_classifier(folder, *, kind: str = DEFAULT_KIND, **options):
    """A classifier of the kind (kiwb.kinds: its head's Auto class) in float32, whatever
    precision it was saved in.

    transformers 5 loads a checkpoint in its saved precision (dtype="auto"): an fp16-saved
    student then fails loss scaling ("Attempting to unscale FP16 gradients"), a bf16 one
    rounds away updates at fine-tuning learning rates, and a teacher scores in half precision
    although float32 was asked for. Half precision is autocast's job, on CUDA only.
    """
    import transformers

    auto_class = getattr(transformers, kind_named(kind).checkpoints.auto_model)
    return auto_class.from_pretrained(folder, dtype=torch.float32, **options)


def ready_to_pad(tokenizer, model, what: str) -> None:
    """Let batches of several texts pad. A tokenizer without a pad token pads with its EOS
    (GPT-2 style), else with the pad id its model's config names; the model's config then
    names the tokenizer's pad id, since a decoder classifier finds each text's last real token
    by it and Qwen and Llama classifiers often save none. `what` names the model in the
    refusal where there is nothing to pad with."""
    if tokenizer.pad_token is None:
        named = model.config.pad_token_id  # a config's pad id the tokenizer does not name
        if tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        elif named is not None and named >= 0:
            tokenizer.pad_token = tokenizer.convert_ids_to_tokens(named)
        else:
            raise KiwbError(unpaddable(what))
    # the model finds each text's last real token by this id: the one batches are padded with
    model.config.pad_token_id = tokenizer.pad_token_id


def resolve_device(name: str) -> torch.device:
    """`auto` picks CUDA when present, then Apple MPS, else the CPU. A misspelt name, or a
    device this machine lacks, is refused in one line naming it and what is here."""
    check_device(name, "device")
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    device = torch.device(name)
    here = f"available here: {', '.join(available_devices())}"
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise KiwbError(f"device {name!r}: CUDA is not available here ({here}); "
                            'use device = "auto" or "cpu"')
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise KiwbError(f"device {name!r}: only {torch.cuda.device_count()} CUDA device(s) "
                            f"here ({here})")
    if device.type == "mps" and not _mps_available():
        raise KiwbError(f"device {name!r}: Apple MPS is not available here ({here}); "
                        'use device = "auto" or "cpu"')
    return device


def available_devices() -> list[str]:
    """The devices this machine has, by the names kiwb accepts: cpu, each GPU, mps."""
    gpus = [f"cuda:{index}" for index in range(torch.cuda.device_count())]
    return ["cpu", *gpus, *(["mps"] if _mps_available() else [])]


def _mps_available() -> bool:
    return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


def native_bf16(device: torch.device) -> bool:
    """Whether `device` is a GPU that computes in bfloat16 natively (CUDA compute capability
    8.0, Ampere, or later; every ROCm GPU torch runs on), not by emulation."""
    if device.type != "cuda":
        return False
    if torch.version.hip:  # as torch.cuda.is_bf16_supported answers on ROCm
        return True
    # torch.cuda.is_bf16_supported(including_emulation=False) makes this very check, but of
    # the *current* device only: asking `device` itself answers for any GPU of the machine,
    # whichever is current (a rank may ask before it makes its own GPU current).
    return torch.cuda.get_device_capability(device)[0] >= 8


def _gpu_named(device: torch.device) -> str:
    """`device`'s GPU by name and compute capability, for a log line or an error."""
    major, minor = torch.cuda.get_device_capability(device)
    return f"{device} ({torch.cuda.get_device_name(device)}, compute capability {major}.{minor})"


def scoring_precision_for(dtype: str, device: torch.device) -> tuple[str, str | None]:
    """The precision scores are computed in on `device`, and the one log line that says why
    it is not [scoring] dtype (None when it is, or off CUDA, where autocast never applies)."""
    if device.type != "cuda":
        return "float32", None
    if dtype == "bfloat16" and not native_bf16(device):
        # Not float16: bfloat16 is chosen for its range, and float16 overflows in some models.
        return "float32", (f'[scoring] dtype = "bfloat16": {_gpu_named(device)} only emulates '
                           "bfloat16, slowly; scoring in float32 instead")
    return dtype, None


def scoring_precision(dtype: str, device: torch.device) -> str:
    """The precision scores are computed in: [scoring] dtype under autocast on CUDA (float32
    for bfloat16 on a GPU without it), float32 elsewhere (autocast applies on CUDA only)."""
    return scoring_precision_for(dtype, device)[0]


def training_precision_for(setting: str, device: torch.device) -> tuple[str, str | None]:
    """The [training] mixed_precision a run uses on `device`, and the one log line that says
    why it is not the one asked for (None when it is, or when `auto` chose)."""
    if device.type != "cuda":  # autocast applies on CUDA only
        return "no", (None if setting in ("no", "auto") else
                      f"mixed_precision = {setting!r} applies on CUDA only; training in float32 "
                      f"on {device}")
    if setting == "auto":  # bf16 needs no loss scaling, and fine-tuning is robust to its rounding
        return ("bf16" if native_bf16(device) else "no"), None
    if setting == "bf16" and not native_bf16(device):
        # Emulated bf16 is slower than float32; fp16 is this GPU's half precision, and loss
        # scaling makes up for its narrower range.
        return "fp16", (f'mixed_precision = "bf16": {_gpu_named(device)} only emulates '
                        "bfloat16, slowly; training in fp16 with loss scaling instead")
    return setting, None


def training_precision(setting: str, device: torch.device) -> str:
    """The [training] mixed_precision a run uses: half precision on CUDA only; `auto` is bf16
    where the GPU has it natively, and an explicit bf16 is fp16 where it does not."""
    return training_precision_for(setting, device)[0]


def agreed_training_precision(setting: str, mine: str, members: list[dict]
                              ) -> tuple[str, str | None]:
    """The precision every rank of a run trains in: rank 0's (`mine`, from `setting`) unless
    it is bf16 and some rank's GPU only emulates bfloat16 (`members`: what each rank said of
    its GPU when the ranks met, kiwb.workers.ranks.join_ranks), and the line saying so.

    One precision for all ranks, not a fallback per rank: the ranks average their gradients
    before the loss scaler unscales them, so one rank's scaled fp16 gradients must not meet
    the others' unscaled bf16 ones."""
    if mine != "bf16":
        return mine, None
    lacking = [member for member in members if member.get("gpu") and not member.get("bf16")]
    if not lacking:
        return mine, None
    first = lacking[0]
    fallback = "no" if setting == "auto" else "fp16"  # auto's rule on one such GPU
    return fallback, (f"rank {first['rank']}'s GPU ({first['gpu_name']} on {first['host']}) "
                      "only emulates bfloat16: every rank trains in "
                      f"{'float32' if fallback == 'no' else 'fp16 with loss scaling'}, since the "
                      "ranks average their gradients together")


def to_device(batch, device: torch.device) -> dict[str, torch.Tensor]:
    """A tokenized batch on `device`; to CUDA from pinned memory without blocking the host,
    so the next batch is padded while this one is copied and computed."""
    if device.type != "cuda":
        return {name: value.to(device) for name, value in batch.items()}
    return {name: value.pin_memory().to(device, non_blocking=True) for name, value in batch.items()}


def autocast_context(device: torch.device, dtype_name: str):
    """Mixed precision on CUDA when a half type is asked for; a no-op elsewhere."""
    dtype = _DTYPES[dtype_name]
    if device.type == "cuda" and dtype != torch.float32:
        return torch.autocast("cuda", dtype=dtype)
    return contextlib.nullcontext()


# Messages of memory exhaustion that are not torch.cuda.OutOfMemoryError: cuBLAS and cuDNN
# report a failed workspace allocation in their own words.
_OUT_OF_MEMORY_WORDS = ("out of memory", "cublas_status_alloc_failed", "cudnn_status_alloc_failed",
                        # CUDA's memory-efficient attention takes at most 65,535 rows a call
                        # (replicated MC passes reach it first: K x texts): halving fits it too
                        "when the batch size exceeds")


def is_out_of_memory(error: BaseException) -> bool:
    message = str(error).lower()
    return isinstance(error, torch.cuda.OutOfMemoryError) or any(w in message for w in _OUT_OF_MEMORY_WORDS)


def prepare_device(device: torch.device) -> None:
    """Make `device` this process's current CUDA device (so `cuda:1` allocates nothing on
    cuda:0), allow TF32 matmuls (float32 accuracy for kiwb's purposes at tensor-core speed),
    and start its peak-memory count afresh for the stage that begins. A no-op off CUDA."""
    if device.type != "cuda":
        return
    if device.index is not None:
        torch.cuda.set_device(device)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.cuda.reset_peak_memory_stats(device)


def free_accelerator_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


def halving_on_oom(attempt: Callable[[int], Result], batch_size: int, device: torch.device,
                   doing: str) -> tuple[Result, int]:
    """`attempt(batch)` from `batch_size` down, halved after each out-of-memory error; returns
    its result and the batch size that fitted."""
    while True:
        try:
            return attempt(batch_size), batch_size
        except RuntimeError as error:
            if not (is_out_of_memory(error) and batch_size > 1):
                raise
        # Only out here is the error's traceback gone, and with it the failed batch's tensors,
        # so only now can the cache give that memory back.
        free_accelerator_memory(device)
        console.print(f"Out of memory on {device} {doing} {batch_size} texts at a time; "
                      f"going on with {batch_size // 2}", highlight=False, markup=False, soft_wrap=True)
        batch_size //= 2


@dataclass
class FittedBatch:
    """A batch size carried from one piece of work to the next: once a size ran out of memory,
    later shards and evaluations start at the size that fitted, not at the configured one."""

    size: int
    halvings: int = 0

    def run(self, attempt: Callable[[int], Result], device: torch.device, doing: str,
            items: int | None = None) -> Result:
        # No larger than the items to batch: halving a size above them changes nothing.
        start = max(1, min(self.size, items)) if items is not None else self.size
        result, fitted = halving_on_oom(attempt, start, device, doing)
        if fitted < start:  # shrink only on a real halving, not for a short last shard
            self.halvings += (start // fitted).bit_length() - 1
            self.size = fitted
        return result


def device_description(device: torch.device) -> dict:
    """What a job records about its device (GPU name and memory on CUDA)."""
    if device.type != "cuda":
        return {"device": str(device)}
    index = device.index if device.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    return {"device": f"cuda:{index}", "gpu": props.name, "gpu_memory_gb": round(props.total_memory / 2**30, 1)}


def peak_memory_gb(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    return round(torch.cuda.max_memory_allocated(device) / 2**30, 3)
