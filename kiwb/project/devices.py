"""The device names kiwb accepts, as text: `--device`, `--devices`, `[scoring] device` and
`[training] device` share one grammar, checked before any job is recorded.

Torch-free: whether a named device is present on this machine is the worker's question
(`kiwb.workers.runtime.resolve_device`); here only its spelling is checked, so a typo is
refused in one line instead of reaching `torch.device`.
"""

from __future__ import annotations

import re

from kiwb.errors import KiwbError

# [0-9], not \d: \d also matches other scripts' digits, which torch refuses. No leading zero
# (torch refuses cuda:01).
DEVICE_PATTERN = r"auto|cpu|cuda(:(0|[1-9][0-9]*))?|mps"
DEVICE_FORMS = "auto, cpu, cuda, cuda:N or mps"
DEVICES_FORMS = f"a comma list of devices ({DEVICE_FORMS}; e.g. cuda:0,cuda:1 or cpu,cpu) or all"


def is_device(name: str) -> bool:
    """Whether `name` is spelt as kiwb's devices are (present here or not)."""
    return re.fullmatch(DEVICE_PATTERN, name) is not None


def check_device(name: str, where: str = "--device") -> str:
    """`name` when it is a device name, else one line naming `where`, the value and the forms."""
    if not is_device(name):
        raise KiwbError(f"{where} {name!r}: unknown device; use {DEVICE_FORMS}")
    return name


def device_list(devices: str | None) -> list[str] | None:
    """The --devices names, `all` kept for the worker to expand (None: one process)."""
    if devices is None:
        return None
    names = [name.strip() for name in devices.split(",") if name.strip()]
    if not names or ("all" in names and len(names) > 1):
        raise KiwbError(f"--devices {devices!r}: give {DEVICES_FORMS}")
    bad = [name for name in names if name != "all" and not is_device(name)]
    if bad:
        raise KiwbError(f"--devices {devices!r}: unknown device {bad[0]!r}; give {DEVICES_FORMS}")
    # Two ranks on one GPU fail inside NCCL ("Duplicate GPU detected") when training, and
    # share it for nothing when scoring. CPU ranks may share the cores (cpu,cpu).
    gpus = [_one_gpu_name(name) for name in names if name.startswith(("cuda", "mps"))]
    twice = next((name for i, name in enumerate(gpus) if name in gpus[:i]), None)
    if twice is not None:
        raise KiwbError(f"--devices {devices!r}: {twice} is named twice; one process per GPU "
                        "(e.g. cuda:0,cuda:1)")
    return names


def _one_gpu_name(name: str) -> str:
    """`cuda` is the first GPU, as torch takes it."""
    return "cuda:0" if name == "cuda" else name
