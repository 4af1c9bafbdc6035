"""Whether an upload to the Hugging Face Hub (`kiwb export --push-to-hub`) can start on this
machine: what is known before anything is exported, refused in one line before the job is
recorded (the CLI and the Export pane both ask here). Light: huggingface_hub only."""

from __future__ import annotations

from kiwb.project.config_schema import HUB_ID


def upload_problem(repo_id: str) -> str | None:
    """Why an upload to `repo_id` cannot start here, in one line; None when it can."""
    from huggingface_hub import constants, get_token

    if not HUB_ID.fullmatch(repo_id) or ".." in repo_id.split("/"):
        return f"--push-to-hub {repo_id!r}: give a model repository as ORG/NAME (or USER/NAME)"
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:  # the Hub's own rules of a name (length, "--", "..", a final ".git" or ".")
        validate_repo_id(repo_id)
    except HFValidationError as error:
        said = str(error).strip().splitlines()[0]
        return f"--push-to-hub {repo_id}: not a name the Hub takes: {said}"
    if constants.HF_HUB_OFFLINE:
        return (f"--push-to-hub {repo_id}: HF_HUB_OFFLINE is set, and an upload needs the Hub; "
                "unset it, or export without --push-to-hub and upload the folder later")
    if get_token() is None:
        return (f"--push-to-hub {repo_id}: no Hugging Face token on this machine; run "
                "`hf auth login` or set HF_TOKEN to a token that can write to it")
    return None
