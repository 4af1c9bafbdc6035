"""Hub data sets: a [data.*] path "hf://datasets/ORG/NAME" (with subset and split) is read through
datasets.load_dataset, and a ClassLabel column's names become the labels. The Hub cannot be
reached here, so the tests give load_dataset a local folder laid out as a Hub data set
repository (a README.md whose YAML names the subsets, splits and features): the same call,
the same code path, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_kiwb
from tiny import TOPICS, make_texts

from kiwb.errors import DataError
from kiwb.project.config_schema import HUB_DATA
from kiwb.workers.data import load_table

NAMES = list(TOPICS)  # the ClassLabel's names, in id order


def hub_repository(folder: Path, splits: dict[str, list[dict]]) -> Path:
    """A data set repository as the Hub keeps one: a jsonl file per split, and a README.md
    card whose YAML declares subset "default" (its splits) and a ClassLabel "label"."""
    (folder / "data").mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        (folder / "data" / f"{split}.jsonl").write_text(
            "".join(json.dumps({"text": row["text"], "label": NAMES.index(row["label"])}) + "\n"
                    for row in rows), encoding="utf-8")
    files = "".join(f"  - split: {split}\n    path: data/{split}.jsonl\n" for split in splits)
    names = "".join(f"          '{number}': {name}\n" for number, name in enumerate(NAMES))
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n" + files
        + "dataset_info:\n  features:\n  - name: text\n    dtype: string\n  - name: label\n"
        "    dtype:\n      class_label:\n        names:\n" + names + "---\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    return hub_repository(tmp_path_factory.mktemp("hub") / "news",
                          {"train": make_texts(24, seed=3), "test": make_texts(16, seed=4)})


def test_a_split_is_read_with_its_class_label_names(repository):
    table = load_table(f"{HUB_DATA}{repository}", label_column="label", split="test")
    expected = make_texts(16, seed=4)
    assert table.texts == [row["text"] for row in expected]
    assert table.labels == [row["label"] for row in expected]  # names, not the stored ids
    assert table.source == f"{HUB_DATA}{repository}"


@pytest.mark.parametrize(("options", "fragments"), [
    ({}, ["holds splits train, test", "set split in kiwb.toml [data.eval]"]),
    ({"split": "validation"}, ['Unknown split "validation"', "set split in kiwb.toml [data.eval]"]),
    ({"split": "train", "subset": "other"}, ["(subset 'other')", "'other' not found",
                                             "set subset in kiwb.toml [data.eval]"]),
    ({"split": "train", "text_column": "body"}, ["no column 'body' (columns: text, label)",
                                                 "set text_column"]),
])
def test_a_bad_split_subset_or_column_is_one_line_naming_the_data_set(repository, options,
                                                                      fragments):
    with pytest.raises(DataError) as refused:
        load_table(f"{HUB_DATA}{repository}", role="eval", **options)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{HUB_DATA}{repository}")
    for fragment in fragments:
        assert fragment in message, message


def test_an_empty_split_is_refused(tmp_path):
    folder = hub_repository(tmp_path / "empty", {"train": make_texts(4, seed=1), "test": []})
    with pytest.raises(DataError, match="no rows|has no data|corresponds to no data") as refused:
        load_table(f"{HUB_DATA}{folder}", split="test")
    assert str(refused.value).startswith(f"{HUB_DATA}{folder}")


def test_a_split_without_labels_is_no_labeled_set(tmp_path):
    """ClassLabel's -1 ("no label", as in many Hub test splits) is refused, not read as the
    last class."""
    folder = hub_repository(tmp_path / "unlabeled-test", {"train": make_texts(4, seed=1)})
    rows = (folder / "data" / "train.jsonl").read_text().splitlines()
    rows[2] = json.dumps({**json.loads(rows[2]), "label": -1})
    (folder / "data" / "train.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as refused:
        load_table(f"{HUB_DATA}{folder}", label_column="label")
    assert f"{HUB_DATA}{folder}: row 3 has no label" in str(refused.value)


def test_a_list_of_class_label_ids_reads_as_names(tmp_path):
    """A multi-label column of ClassLabel ids (go_emotions' labels), in a subset of its own."""
    from kiwb.kinds.multilabel.data import load_label_set_table

    folder = tmp_path / "emotions"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "simple.jsonl").write_text(
        '{"text": "a goal", "labels": [0, 1]}\n{"text": "a song", "labels": []}\n')
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: simple\n  data_files:\n  - split: train\n"
        "    path: data/simple.jsonl\ndataset_info:\n- config_name: simple\n  features:\n"
        "  - name: text\n    dtype: string\n  - name: labels\n    sequence:\n      class_label:\n"
        "        names:\n          '0': sports\n          '1': music\n---\n", encoding="utf-8")
    table = load_label_set_table(f"{HUB_DATA}{folder}", label_column="labels", subset="simple")
    assert table.label_sets == [("sports", "music"), ()]


def test_a_subset_is_refused_for_a_local_file(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "a"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="a subset is a Hub data set's"):
        load_table(str(path), subset="default", role="eval")


def test_an_id_not_cached_offline_is_refused_in_one_line(tmp_path, teachers_dir):
    from cli_helpers import write_project
    from test_bad_input import assert_refused

    project = write_project(tmp_path / "proj", {"a": teachers_dir / "teacher_a",
                                                "b": teachers_dir / "teacher_b"},
                            f"{HUB_DATA}nobody-here/no-such-data")
    refused = run_kiwb("score", project, cwd=tmp_path, check=False)  # HF_HUB_OFFLINE=1
    assert_refused(refused, f"{HUB_DATA}nobody-here/no-such-data: not in this machine's "
                   "datasets cache and the Hub cannot be reached", "load it once where there "
                   "is internet")


def test_an_id_not_cached_without_network_is_refused_at_once_without_retries(tmp_path,
                                                                              teachers_dir):
    """No HF_HUB_OFFLINE, and a Hub that does not answer (a closed local port): kiwb reads
    offline after one probe instead of the Hub libraries' half-minute of retry warnings."""
    import socket
    import subprocess
    import sys
    import time

    from cli_helpers import kiwb_env, write_project
    from test_bad_input import assert_refused

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    project = write_project(tmp_path / "proj", {"a": teachers_dir / "teacher_a",
                                                "b": teachers_dir / "teacher_b"},
                            f"{HUB_DATA}nobody-here/no-such-data")
    env = {key: value for key, value in kiwb_env().items() if key != "HF_HUB_OFFLINE"}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{port}", HF_HOME=str(tmp_path / "hf-home"))
    started = time.monotonic()
    refused = subprocess.run([sys.executable, "-m", "kiwb", "score", str(project)], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=120)
    assert time.monotonic() - started < 30
    assert "Retry" not in refused.stderr and "HF_HUB_OFFLINE" not in env
    assert_refused(refused, f"{HUB_DATA}nobody-here/no-such-data: not in this machine's "
                   "datasets cache and the Hub cannot be reached")


@pytest.mark.slow
def test_a_project_scores_and_integrates_hub_data(tmp_path, teachers_dir, repository):
    """The pool from the train split, the eval set from test with its ClassLabel names."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "kiwb.toml").write_text("\n".join([
        'name = "hub"',
        *[line for name in ("a", "b") for line in (
            "[[teachers]]", f'name = "{name}"', f'path = "{teachers_dir / f"teacher_{name}"}"')],
        "[data.unlabeled]", f'path = "{HUB_DATA}{repository}"', 'split = "train"',
        "[data.eval]", f'path = "{HUB_DATA}{repository}"', 'split = "test"',
        'label_column = "label"', 'subset = "default"',
        "[scoring]", "mc_passes = 4", "shard_size = 16"]) + "\n", encoding="utf-8")
    run_kiwb("score", project, cwd=tmp_path)
    summary = json.loads(run_kiwb("integrate", project, "--json", cwd=tmp_path).stdout)
    assert summary["num_texts"] == 24
    assert summary["eval"]["num_texts"] == 16 and summary["eval"]["ensemble_accuracy"] is not None


@pytest.mark.parametrize(("key", "role", "place"), [
    ("split", "eval", "split in kiwb.toml [data.eval]"),
    ("path", "teach", "--data"), ("split", "teach", "--split"),
    ("path", "teach-dev", "--dev"), ("split", "teach-dev", "--dev-split"),
    ("subset", "teach-dev", "--dev-subset"), ("text_column", "teach-dev", "--text-column"),
    ("subset", "evaluate", "--subset"), ("pair_column", "evaluate", "pair_column in kiwb.toml [data.eval]"),
])
def test_an_error_names_where_the_user_sets_the_key(key, role, place):
    from kiwb.workers.data import setting_place

    assert setting_place(key, role) == place
