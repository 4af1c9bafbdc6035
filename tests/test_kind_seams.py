"""Every kind gives the shared jobs what kiwb/kinds/seams.py says a seam takes: each required
seam, no seam the table does not know, and functions whose parameters are the seam's, by name
and in order (a renamed or reordered parameter breaks a positional call from a shared job)."""

from __future__ import annotations

import importlib
import inspect

import pytest

from kiwb.kinds import KINDS, run_seam
from kiwb.kinds.seams import SEAMS


def seam_function(target: str):
    module, function = target.split(":")
    return getattr(importlib.import_module(module), function)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_provides_every_required_seam_and_only_known_ones(kind):
    named = set(KINDS[kind].seams)
    assert named <= set(SEAMS), named - set(SEAMS)
    assert {seam.name for seam in SEAMS.values() if seam.required} <= named


@pytest.mark.parametrize("kind, seam", sorted((kind, seam) for kind, described in KINDS.items()
                                              for seam in described.seams))
def test_a_seams_function_takes_the_seams_parameters(kind, seam):
    declared = SEAMS[seam]
    parameters = list(inspect.signature(seam_function(KINDS[kind].seams[seam])).parameters.values())
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert tuple(p.name for p in positional) == declared.parameters
    with_defaults = tuple(p.name for p in positional if p.default is not p.empty)
    assert with_defaults == declared.defaults, "a caller may leave out exactly these"
    takes_options = any(p.kind == p.VAR_KEYWORD for p in parameters)
    assert takes_options == declared.options


def test_an_unknown_seam_is_a_callers_error_named_with_the_known_ones():
    with pytest.raises(ValueError, match="no seam 'evaluat'; the seams are score_shard, "):
        run_seam("sequence", "evaluat")
    with pytest.raises(ValueError, match="the sequence kind provides no 'export'"):
        run_seam("sequence", "export")
