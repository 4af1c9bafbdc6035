"""How kiwb's representation-routing settings were chosen (issue 42): the grid on every dev set.

    python benchmarks/representation_settings.py [--demo DIR]

Reads the scored projects the other benchmarks leave (run them first): debian-8's
(`routing.py --preset cpu`), the three to five teachers' (`many_teachers.py`) and the demo
(`kiwb demo DIR --no-ui`, default /tmp/demo). On each dev set, every setting of the grid
(representation_routing.py's) is fitted on that project's pool; the settings with the best
mean dev accuracy over the sets are kiwb's (kiwb/core/representation_routing.py). Writes
benchmarks/out/representation_settings.json and its BENCHMARKS.md section.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import debian8  # noqa: E402,F401  (it puts this checkout's kiwb on sys.path)
import representation_routing as representations  # noqa: E402
from report import write_section  # noqa: E402

SHOWN = 8  # rows of the table: the best settings by mean dev accuracy


def dev_sets(demo: Path) -> dict[str, Path]:
    out = HERE / "out"
    found = {"debian-8": out / "cpu" / "project", "demo": demo}
    for count in (3, 4, 5):
        found[f"{count} teachers"] = out / "many_teachers" / f"{count}-teachers" / "project"
    missing = [f"{name} ({path})" for name, path in found.items() if not (path / "store.sqlite").exists()]
    if missing:
        raise SystemExit("not scored yet: " + ", ".join(missing) + "; run the benchmark that makes it")
    return found


def kiwb_settings() -> str:
    """The grid's name of kiwb's own mahalanobis settings."""
    from kiwb.core.representation_routing import DEFAULTS

    return (f"mahalanobis{' relative' if DEFAULTS.relative else ''} refits={DEFAULTS.refits} "
            f"shrinkage={DEFAULTS.shrinkage} seeds={DEFAULTS.seed_share}")


def render(grids: dict[str, dict]) -> str:
    names = [name for name in next(iter(grids.values())) if all(name in grid for grid in grids.values())]
    mean = {name: sum(grid[name]["dev"] for grid in grids.values()) / len(grids) for name in names}
    ranked = sorted(names, key=lambda name: -mean[name])
    ours = kiwb_settings()
    shown = ranked[:SHOWN] + ([ours] if ours in names and ours not in ranked[:SHOWN] else [])
    lines = [f"Routing accuracy on each dev set of the {len(names)} settings tried, fitted on each "
             f"project's pool: the {SHOWN} best by their mean, and kiwb's (**bold**).", "",
             "| settings | mean | " + " | ".join(grids) + " |", "|---|---|" + "---|" * len(grids)]
    for name in shown:
        label = f"**{name}**" if name == ours else name
        lines.append(f"| {label} | {100 * mean[name]:.1f} | "
                     + " | ".join(f"{100 * grid[name]['dev']:.1f}" for grid in grids.values()) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--demo", type=Path, default=Path("/tmp/demo"),
                        help="a demo project made by `kiwb demo DIR --no-ui`")
    args = parser.parse_args()
    grids = {}
    for name, project in dev_sets(args.demo).items():
        started = time.perf_counter()
        pool = representations.scores_of(project, "unlabeled")
        grids[name] = representations.sweep(pool, {"dev": representations.scores_of(project, "eval")})
        print(f"{name}: {len(grids[name])} settings in {time.perf_counter() - started:.0f} s", flush=True)
    (HERE / "out" / "representation_settings.json").write_text(json.dumps(grids, indent=1))
    rendered = render(grids)
    write_section("representation settings", "benchmarks/representation_settings.py", rendered)
    print(rendered)


if __name__ == "__main__":
    main()
