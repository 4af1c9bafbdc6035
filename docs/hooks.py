"""MkDocs hooks: the pages whose text the code or the benchmark record owns are filled in at
build time, so the site cannot drift from them.

Pages are written as GitHub reads Markdown (a list may follow its paragraph's last line, and
a nested list is indented two spaces); `github_lists` turns them into what Python-Markdown,
MkDocs' reader, needs (a blank line before a list, four spaces per level).

A page names what it wants with a marker line, replaced when the page is read:
- `<!-- kiwb: cli reference -->`: every command's usage and arguments, from the argparse parser;
- `<!-- kiwb: configuration reference -->`: every kiwb.toml key, from the settings schema;
- `<!-- kiwb: benchmarks summary -->`: BENCHMARKS.md's opening summary table;
- `<!-- kiwb: benchmarks record -->`: the whole of BENCHMARKS.md.
"""

from __future__ import annotations

import re
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
RECORD_PAGE = "benchmarks-record.md"  # the page that holds BENCHMARKS.md, beside benchmarks.md


def benchmarks_summary(text: str) -> str:
    """The block between BENCHMARKS.md's summary markers, its anchors pointing at the record."""
    match = re.search(r"<!-- summary -->\n(.*?)<!-- /summary -->", text, flags=re.S)
    if match is None:
        raise ValueError(f"{BENCHMARKS} has no <!-- summary --> ... <!-- /summary --> block")
    body = re.sub(r"^## .*\n", "", match.group(1), count=1)  # the page gives its own heading
    return body.replace("](#", f"]({RECORD_PAGE}#")


def filled(markdown: str) -> str:
    """A page's text with each marker replaced by what it names."""
    fillers = {
        "cli reference": _cli_reference,
        "configuration reference": _configuration_reference,
        "benchmarks summary": lambda: benchmarks_summary(BENCHMARKS.read_text(encoding="utf-8")),
        "benchmarks record": lambda: BENCHMARKS.read_text(encoding="utf-8"),
    }

    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name not in fillers:
            raise ValueError(f"unknown docs marker <!-- kiwb: {name} -->; known: {', '.join(fillers)}")
        return fillers[name]().rstrip("\n")

    return re.sub(r"^<!-- kiwb: ([a-z ]+) -->$", fill, markdown, flags=re.M)


def _cli_reference() -> str:
    from kiwb.cli_reference import reference_markdown

    return reference_markdown()


def _configuration_reference() -> str:
    from kiwb.project.config_reference import reference_markdown

    return reference_markdown()


LIST_ITEM = re.compile(r"^( *)(?:[-*+]|\d+[.)]) ")


def github_lists(markdown: str) -> str:
    """Lists as GitHub reads them, made what Python-Markdown reads the same way: a blank line
    before a list item that follows a paragraph's or a table's last line, and each list's
    indentation doubled (two spaces per level become four; a fenced block inside an item moves
    with its fence, keeping its own indentation)."""
    lines, out, in_list, fence_shift = markdown.split("\n"), [], False, None
    for number, line in enumerate(lines):
        if fence_shift is not None:  # inside a fenced block: only the item's shift applies
            if line.strip().startswith("```"):
                line, fence_shift = " " * fence_shift + line, None
            elif line.strip():
                line = " " * fence_shift + line
            out.append(line)
            continue
        item = LIST_ITEM.match(line)
        if item:
            # Python-Markdown starts a list only after a blank line, and reads an item that
            # follows a paragraph's last line as that paragraph's next line
            if out and out[-1].strip() and not LIST_ITEM.match(out[-1]):
                out.append("")
            in_list = in_list or not item.group(1)
        elif in_list and not line.strip():
            following = next((later for later in lines[number + 1:] if later.strip()), "")
            in_list = following.startswith(" ") or bool(LIST_ITEM.match(following))
        elif in_list and not line.startswith(" ") and line.startswith(("#", "|", "```", "<")):
            in_list = False  # a heading, table, fence or html block after the list's last line
        indent = len(line) - len(line.lstrip(" "))
        if in_list and indent:
            line = " " * (2 * indent) + line[indent:]
        if line.strip().startswith("```"):
            fence_shift = indent if in_list else 0
        out.append(line)
    return "\n".join(out)


def on_page_markdown(markdown: str, **_) -> str:
    return github_lists(filled(markdown))
