"""What the learning check and the routing check share: a verdict's mark beside a state."""

from __future__ import annotations


class Verdict:
    """A check's verdict; each check says when its `status` is `flagged`."""

    status: str

    @property
    def flagged(self) -> bool:
        raise NotImplementedError

    @property
    def mark(self) -> str:
        """` ⚠ STATUS` beside a run's or job's state; empty when nothing is wrong."""
        return f" ⚠ {self.status}" if self.flagged else ""
