"""Whether the experiment trackers `[training] report_to` names are installed: checked before a
training job is recorded (and again where it starts), so a missing package is one line at the
start, not a failure after training. Light: it looks the packages up, importing none."""

from __future__ import annotations

import importlib.util

MODULES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}


def tracker_problem(report_to: tuple[str, ...], where: str) -> str | None:
    """One line naming the trackers of `report_to` whose package is missing, and the extra
    that installs them; None when every one is there."""
    missing = [name for name in report_to if importlib.util.find_spec(MODULES[name]) is None]
    if not missing:
        return None
    return (f"{where}: [training] report_to names {', '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed; pip install "
            f"'kiwb[{','.join(missing)}]', or take {'it' if len(missing) == 1 else 'them'} "
            "out of report_to")
