"""Keep library chatter (progress bars, advisories) out of kiwb's own output."""

from __future__ import annotations

import os


def quiet_libraries() -> None:
    """Silence transformers' and the hub's progress bars and warnings; kiwb shows its own."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
