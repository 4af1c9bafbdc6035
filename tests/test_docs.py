"""The README and the documentation stay true: the references are made from the code, every
command in them parses, the README stays a short front door, BENCHMARKS.md opens with its
summary, and the README's tour runs as written on tiny real models. (`mkdocs build --strict`,
which also checks every link and anchor, runs in CI: .ci/run.)"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from browser import chromium, needs_browser
from cli_helpers import kiwb_env
from tiny import TEACHER_A_LABELS, TEACHER_B_LABELS, build_teacher, make_texts

from kiwb.cli import build_parser
from kiwb.cli_reference import documented_actions
from kiwb.cli_reference import reference_markdown as cli_reference
from kiwb.project import config_schema
from kiwb.project.config_reference import SECTIONS
from kiwb.project.config_reference import reference_markdown as config_reference
from kiwb.project.config_render import toml_fields

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"
PAGES = {path.relative_to(DOCS).as_posix(): path.read_text(encoding="utf-8")
         for path in sorted(DOCS.rglob("*.md"))}


def _hooks():
    """docs/hooks.py, the MkDocs hooks that fill the generated pages, as the build loads it."""
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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






def _slug(heading: str) -> str:
    """A heading's anchor as Python-Markdown's toc (MkDocs) makes it."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def test_the_readme_is_a_short_front_door_whose_links_resolve():
    assert len(README.splitlines()) <= 250
    titles = re.findall(r"^## (.*)$", README, flags=re.M)
    assert titles == ["Set-up", "The demo", "A five-minute tour", "Teacher kinds", "Documentation",
                      "Benchmarks"]
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    assert len(targets) >= 15
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"
    # each teacher kind has its how-to page, and the README's table names them all
    for page in ("single-label", "token", "multi-label", "multi-task", "embedding"):
        assert f"(docs/kinds/{page}.md)" in _section("Teacher kinds")


def test_the_configuration_reference_page_is_made_from_the_settings_schema():
    page = _hooks().filled(PAGES["reference/configuration.md"])
    assert config_reference() in page and "<!-- kiwb:" not in page
    tables = {cls for name, cls in vars(config_schema).items() if name.endswith("Config")
              and isinstance(cls, type) and cls.__module__ == config_schema.__name__}
    containers = {config_schema.ProjectConfig, config_schema.DataConfig}  # tables of tables
    assert {cls for _, cls in SECTIONS} == tables - containers, "a settings table is not documented"
    for title, cls in SECTIONS:
        assert f"## {title}" in page
        assert all(f"| `{field.name}` |" in page for field, _ in toml_fields(cls))


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser by its name (`labels import` included)."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[prefix + name] = sub
                found.update(_commands(sub, prefix + name + " "))
    return found


def test_the_cli_reference_page_documents_every_argument_of_every_command():
    page = _hooks().filled(PAGES["reference/cli.md"])
    assert cli_reference() in page and "<!-- kiwb:" not in page
    sections = dict(re.findall(r"^#+ `kiwb ([a-z ]+)`\n(.*?)(?=^#+ `kiwb |\Z)", page, flags=re.M | re.S))
    commands = _commands(build_parser())
    assert set(sections) == set(commands)
    for name, parser in commands.items():
        parser.format_help()  # argparse expands each help text: a stray % would fail here
        for action in documented_actions(parser):
            assert action.help, f"kiwb {name}: {action.option_strings or action.dest} has no help"
            for option in action.option_strings or [action.metavar or action.dest]:
                assert f"`{option}" in sections[name], f"kiwb {name}: {option} is not documented"


def test_every_kiwb_command_in_the_readme_and_the_docs_parses():
    parser = build_parser()
    texts = {"README.md": README, **{f"docs/{name}": text for name, text in PAGES.items()}}
    invocations = [(name, words) for name, text in texts.items() for block in _bash_blocks(text)
                   for line in block for words in _kiwb_invocations(line)]
    assert len(invocations) >= 30
    subcommands = set(_commands(parser))
    for name, words in invocations:
        if words and not words[0].startswith("-") and words[0] not in subcommands:
            words = ["ui", *words]  # `kiwb DIR` opens the workbench
        try:
            parser.parse_args(words)
        except SystemExit:
            pytest.fail(f"{name}: command does not parse: kiwb {shlex.join(words)}")


def test_benchmarks_md_opens_with_its_summary_and_the_docs_page_shows_it():
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- summary -->\n(.*?)<!-- /summary -->", text, flags=re.S)
    assert block is not None and text.index("<!-- summary -->") < text.index("\n## ")
    assert len(block.group(1).splitlines()) <= 60
    rows = [line for line in block.group(1).splitlines() if line.startswith("| ") and "---" not in line]
    kinds = {row.split("|")[1].strip() for row in rows[1:]}
    assert kinds == {"single-label", "token", "multi-label", "multi-task", "embedding"}
    assert rows[0].split("|")[4:8] == [" Ensemble ", " best baseline ", " MUKI ", " Supervised "]
    headings = {_slug(heading) for heading in re.findall(r"^#+ (.*)$", text, flags=re.M)}
    anchors = re.findall(r"\]\(#([^)]+)\)", block.group(1))
    assert anchors and set(anchors) <= headings, set(anchors) - headings
    page = _hooks().filled(PAGES["benchmarks.md"])
    assert rows[1].replace("](#", "](benchmarks-record.md#") in page and "<!-- kiwb:" not in page


def test_lists_written_for_github_are_made_lists_for_mkdocs():
    """GitHub starts a list right under a paragraph and nests by two spaces; Python-Markdown
    (MkDocs) needs a blank line and four. A fenced block in an item moves with its fence."""
    page = ("Intro line:\n- one\n  goes on\n  - nested\n  ```toml\n  key = 1\n    deeper = 2\n  ```\n"
            "- two\n\n  more of two\n\nAfter.\n  not a list\n")
    assert _hooks().github_lists(page) == (
        "Intro line:\n\n- one\n    goes on\n\n    - nested\n    ```toml\n    key = 1\n      deeper = 2\n"
        "    ```\n\n- two\n\n    more of two\n\nAfter.\n  not a list\n")


def test_an_unknown_docs_marker_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown docs marker <!-- kiwb: cli referense -->"):
        _hooks().filled("# A page\n<!-- kiwb: cli referense -->\n")


@pytest.mark.slow
def test_the_readmes_tour_runs_as_written(tmp_path):
    """Build what the README's tour assumes (two teacher folders, a CSV of texts, a labeled CSV,
    a student base), then run its commands and the loading snippet unchanged."""
    # Untrained: the quick start's commands must run, whatever the teachers know.
    build_teacher(tmp_path / "teachers" / "world-sports", "bert", TEACHER_A_LABELS, trained=False, seed=1)
    build_teacher(tmp_path / "teachers" / "business-tech", "roberta", TEACHER_B_LABELS, trained=False, seed=2)
    rows = make_texts(48, seed=3)
    _write_csv(tmp_path / "texts.csv", [{"text": row["text"]} for row in rows])
    _write_csv(tmp_path / "labeled.csv", make_texts(24, seed=4))
    quick_start = _bash_blocks(_section("A five-minute tour"))[0]  # the section's first block
    student = next(words[words.index("--student") + 1] for words in _kiwb_invocations(quick_start[0]))
    build_teacher(tmp_path / student, "bert", ("x", "y"), trained=False, seed=5)  # a local stand-in
    for line in quick_start:
        command = line.replace("kiwb ", f"{shlex.quote(sys.executable)} -m kiwb ", 1)
        result = subprocess.run(command, shell=True, cwd=tmp_path, env=kiwb_env(),
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"{line}\n{result.stderr}"
    labels = set(TEACHER_A_LABELS) | set(TEACHER_B_LABELS)
    assert result.stdout.split()[0] in labels  # kiwb predict's answer: a union label
    snippet = re.search(r"```python\n(.*?)```", _section("A five-minute tour"), flags=re.S).group(1)
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


@pytest.mark.slow
@needs_browser
def test_options_in_the_docs_tables_stay_whole_in_a_browser(tmp_path):
    """The theme lets code break at any character, which cut `--representations` after its
    dashes on the CLI page; the site's stylesheet keeps a table's code on one line."""
    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                           cwd=ROOT, env=dict(kiwb_env(), NO_MKDOCS_2_WARNING="1"),
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 760, "height": 900})  # a narrow window
        page.goto((site / "reference" / "cli" / "index.html").as_uri())
        options = page.eval_on_selector_all(
            "td code", "codes => codes.map(code => [code.textContent, code.getClientRects().length])")
    assert len(options) > 100 and any(text == "--representations" for text, _ in options)
    assert [text for text, lines in options if lines != 1] == []
