"""Whether the experiment trackers `[training] report_to` names are installed: checked before a
training job is recorded (and again where it starts), so a missing package is one line at the
start, not a failure after training. Light: it looks the packages up, importing none."""

from __future__ import annotations

import importlib.util
import os

MODULES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}


def tracker_problem(report_to: tuple[str, ...], where: str) -> str | None:
    """One line naming the trackers of `report_to` whose package is missing, and the extra
    that installs them; None when every one is there."""
    missing = [name for name in report_to if importlib.util.find_spec(MODULES[name]) is None]
    if not missing:
        return _mlflow_store_problem(report_to, where) or _wandb_key_problem(report_to, where)
    return (f"{where}: [training] report_to names {', '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed; pip install "
            f"'kiwb[{','.join(missing)}]', or take {'it' if len(missing) == 1 else 'them'} "
            "out of report_to")


def _mlflow_store_problem(report_to: tuple[str, ...], where: str) -> str | None:
    """MLflow 3 keeps runs, when no MLFLOW_TRACKING_URI names where, in a local SQLite
    database, which only the full mlflow package can write (kiwb[mlflow] installs its client
    alone): without one or the other, a run could not report, so it is said before it starts."""
    if ("mlflow" not in report_to or os.environ.get("MLFLOW_TRACKING_URI")
            or importlib.util.find_spec("sqlalchemy") is not None):
        return None
    return (f"{where}: [training] report_to names mlflow, but MLFLOW_TRACKING_URI is not set "
            "and MLflow's local store needs the full mlflow package; set MLFLOW_TRACKING_URI "
            "to your tracking server, or pip install mlflow")


def _wandb_key_problem(report_to: tuple[str, ...], where: str) -> str | None:
    """W&B online needs an API key (WANDB_API_KEY, or `wandb login`'s entry in ~/.netrc):
    without one wandb.init would ask in the terminal, or fail in a detached job."""
    if "wandb" not in report_to or os.environ.get("WANDB_API_KEY"):
        return None
    if os.environ.get("WANDB_MODE", "").lower() in ("offline", "disabled", "dryrun"):
        return None
    import netrc

    try:
        if netrc.netrc().authenticators("api.wandb.ai"):
            return None
    except (OSError, netrc.NetrcParseError):  # no ~/.netrc, or one kiwb cannot read
        pass
    return (f"{where}: [training] report_to names wandb, but this machine has no W&B API key; "
            "run `wandb login`, set WANDB_API_KEY, or set WANDB_MODE=offline and sync later")
