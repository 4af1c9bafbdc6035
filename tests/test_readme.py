"""The README stays true: its references match the code, its commands parse, and its quick
start runs as written on tiny real models."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import kiwb_env
from tiny import TEACHER_A_LABELS, TEACHER_B_LABELS, build_teacher, make_texts

from kiwb.cli import build_parser
from kiwb.project.config_reference import reference_markdown

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end != -1 else None]


def _bash_blocks(text: str) -> list[list[str]]:
    """The commands of each ```bash block: comments dropped, continued lines joined."""
    blocks = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = block.replace("\\\n", " ")
        blocks.append([line.split(" #")[0].strip() for line in joined.splitlines()
                       if line.strip() and not line.lstrip().startswith("#")])
    return blocks


def _kiwb_invocations(line: str) -> list[list[str]]:
    """The argument lists of every `kiwb ...` in a shell line (`a && kiwb b`, `cd x && kiwb`)."""
    found = []
    for command in re.split(r"&&|;|\|", line):
        words = shlex.split(command)
        if words and words[0] == "kiwb":
            found.append(words[1:])
    return found


def _options(parser: argparse.ArgumentParser) -> list[tuple[str, ...]]:
    """A parser's options (each with its aliases, like -f / --follow), and those of its own
    actions (`kiwb labels import --replace`)."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += [aliases for sub in action.choices.values() for aliases in _options(sub)]
        elif action.option_strings and "--help" not in action.option_strings \
                and action.help != argparse.SUPPRESS:  # hidden options are for tests and CI
            found.append(tuple(action.option_strings))
    return list(dict.fromkeys(found))


def _subcommands() -> dict[str, list[tuple[str, ...]]]:
    """Each subcommand's options, from the parser."""
    parser = build_parser()
    subparsers = next(action for action in parser._actions if action.dest == "command")
    return {name: _options(sub) for name, sub in subparsers.choices.items()}


def test_the_configuration_reference_is_the_one_the_code_makes():
    assert reference_markdown() in README, (
        "README's configuration reference differs from the code; regenerate it with: "
        "python -m kiwb.project.config_reference")


def test_the_cli_reference_lists_every_option_of_every_command():
    options = _subcommands()
    rows = re.findall(r"^\| `(kiwb(?:\\\||[^|])*?)` \|", _section("CLI reference"), flags=re.M)
    documented: dict[str, set[str]] = {}
    for cell in rows:
        words = cell.replace("\\|", "|").split()
        command = "ui" if len(words) == 1 or words[1] not in options else words[1]
        documented.setdefault(command, set()).update(re.findall(r"(?<![\w-])(--[a-z-]+|-f)\b", cell))
    assert set(documented) == set(options), "a command is missing from the table"
    for command, actions in options.items():
        missing = [aliases for aliases in actions if not documented[command] & set(aliases)]
        unknown = documented[command] - {option for aliases in actions for option in aliases}
        assert not missing and not unknown, f"kiwb {command}: {missing} undocumented, {unknown} unknown"


def test_every_kiwb_command_in_the_readme_parses():
    parser = build_parser()
    invocations = [words for block in _bash_blocks(README) for line in block
                   for words in _kiwb_invocations(line)]
    assert len(invocations) >= 10
    for words in invocations:
        if words and not words[0].startswith("-") and words[0] not in _subcommands():
            words = ["ui", *words]  # `kiwb DIR` opens the workbench
        try:
            parser.parse_args(words)
        except SystemExit:
            pytest.fail(f"README command does not parse: kiwb {shlex.join(words)}")


@pytest.mark.slow
def test_the_quick_start_runs_as_written(tmp_path):
    """Build what the quick start assumes (two teacher folders, a CSV of texts, a labeled CSV,
    a student base), then run its commands and the loading snippet unchanged."""
    # Untrained: the quick start's commands must run, whatever the teachers know.
    build_teacher(tmp_path / "teachers" / "world-sports", "bert", TEACHER_A_LABELS, trained=False, seed=1)
    build_teacher(tmp_path / "teachers" / "business-tech", "roberta", TEACHER_B_LABELS, trained=False, seed=2)
    rows = make_texts(48, seed=3)
    _write_csv(tmp_path / "texts.csv", [{"text": row["text"]} for row in rows])
    _write_csv(tmp_path / "labeled.csv", make_texts(24, seed=4))
    quick_start = _bash_blocks(_section("Quick start"))[0]  # the section's first block
    student = next(words[words.index("--student") + 1] for words in _kiwb_invocations(quick_start[0]))
    build_teacher(tmp_path / student, "bert", ("x", "y"), trained=False, seed=5)  # a local stand-in
    for line in quick_start:
        command = line.replace("kiwb ", f"{shlex.quote(sys.executable)} -m kiwb ", 1)
        result = subprocess.run(command, shell=True, cwd=tmp_path, env=kiwb_env(),
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"{line}\n{result.stderr}"
    labels = set(TEACHER_A_LABELS) | set(TEACHER_B_LABELS)
    assert result.stdout.split()[0] in labels  # kiwb predict's answer: a union label
    snippet = re.search(r"```python\n(.*?)```", _section("Quick start"), flags=re.S).group(1)
    loaded = subprocess.run([sys.executable, "-c", snippet + "\nprint(classify.model.config.id2label)"],
                            cwd=tmp_path, env=kiwb_env(), capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    assert all(label in loaded.stdout for label in labels)


def _write_csv(path: Path, rows: list[dict]) -> None:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
