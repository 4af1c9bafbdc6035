"""`kiwb export --push-to-hub ORG/NAME`: the exported folder uploaded to a Hugging Face Hub model
repository with huggingface_hub (the repository is made when missing). What can be known
before exporting is refused before the job starts (kiwb.project.hub_upload_check); a refused
upload is one line naming the repository and what the Hub said."""

from __future__ import annotations

from pathlib import Path

from kiwb.errors import KiwbError


def push_folder(folder: Path, repo_id: str, *, private: bool, run: str) -> str:
    """Upload `folder` to the model repository `repo_id` (made if missing, private if asked);
    returns the commit's address."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi()
    retry = (f"the export is kept in {folder}: upload it with `hf upload {repo_id} {folder}`, or "
             "export again with --force --push-to-hub")
    try:
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        commit = api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="model",
                                   commit_message=f"kiwb export of run {run}")
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else "?"
        said = (getattr(error, "server_message", None) or str(error)).strip().splitlines()[0]
        raise KiwbError(f"upload to {repo_id} refused by {api.endpoint} (HTTP {status}): "
                        f"{said}; {retry}") from None
    except Exception as error:  # the Hub unreachable (httpx's errors are neither OSError nor
        # ConnectionError), a name it refuses, a timeout: all one line, the export kept
        said = (str(error).strip().splitlines() or [""])[0]
        raise KiwbError(f"upload to {repo_id} via {api.endpoint} failed: "
                        f"{type(error).__name__}: {said}; {retry}") from None
    return str(commit)
