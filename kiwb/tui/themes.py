"""Themes are data: TOML files in kiwb/themes (and the user's themes folder) become Theme objects.

A file that cannot be used is reported by name, with the reason, and skipped.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from textual.color import Color, ColorParseError
from textual.theme import Theme

DEFAULT_THEME = "kiwb-dark"
ANSI_THEME = "kiwb-ansi"
FALLBACK_THEME = "textual-dark"
USER_THEMES_ENV = "KIWB_THEMES"  # a folder of extra theme files (default: the user config folder)
_COLOR_KEYS = ("primary", "secondary", "warning", "error", "success", "accent", "foreground",
               "background", "surface", "panel", "boost")
_KNOWN_KEYS = {f.name for f in dataclasses.fields(Theme)}

# Plot colours every theme has: a theme file may set them in [variables], and Textual's own
# themes (also offered in the palette) get these, taken from their standard colours.
PLOT_VARIABLES = {"kiwb-plot": "primary", "kiwb-plot-alt": "warning", "kiwb-right": "success",
                  "kiwb-wrong": "error", "kiwb-threshold": "accent"}


class ThemeFileError(ValueError):
    """A theme file that cannot be used; the message starts with the file's name."""


@dataclass
class LoadedThemes:
    themes: list[Theme] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def package_themes_folder() -> Path:
    return Path(str(resources.files("kiwb") / "themes"))


def user_themes_folder() -> Path:
    if os.environ.get(USER_THEMES_ENV):
        return Path(os.environ[USER_THEMES_ENV]).expanduser()
    from platformdirs import user_config_dir

    return Path(user_config_dir("kiwb")) / "themes"


def theme_memory_file() -> Path:
    """Where the workbench remembers the theme last picked from the palette."""
    from platformdirs import user_config_dir

    return Path(user_config_dir("kiwb")) / "workbench.toml"


def remembered_theme(file: Path) -> tuple[str | None, str | None]:
    """The remembered theme name (None if none), and a note when the file cannot be read."""
    try:
        with open(file, "rb") as handle:
            value = tomllib.load(handle).get("theme")
    except FileNotFoundError:
        return None, None
    except (OSError, tomllib.TOMLDecodeError) as error:
        return None, f"{file}: {error}; starting with the default theme (pick one with ctrl+p)"
    if not isinstance(value, str):
        return None, f"{file}: theme must be a string such as \"kiwb-light\"; starting with the default"
    return value, None


def remember_theme(file: Path, name: str) -> None:
    from kiwb.project.atomic import atomic_write_text

    file.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(file, "# Written by the kiwb workbench: the theme last picked.\n"
                            f"theme = {json.dumps(name)}\n")


def load_themes(folders: list[Path]) -> LoadedThemes:
    """Every *.toml theme in `folders`, in order; a later file of the same name wins."""
    loaded = LoadedThemes()
    for folder in folders:
        for file in sorted(folder.glob("*.toml")) if folder.is_dir() else ():
            try:
                loaded.themes.append(read_theme(file))
            except ThemeFileError as error:
                loaded.problems.append(str(error))
    return loaded


def read_theme(file: Path) -> Theme:
    """One theme file as a Theme; ThemeFileError names the file and what is wrong."""
    try:
        table = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ThemeFileError(f"{file.name}: cannot be read ({error})") from None
    except tomllib.TOMLDecodeError as error:
        raise ThemeFileError(f"{file.name}: not valid TOML ({error})") from None
    unknown = sorted(set(table) - _KNOWN_KEYS)
    if unknown:
        raise ThemeFileError(f"{file.name}: unknown key {unknown[0]!r}; theme keys are "
                             f"{', '.join(sorted(_KNOWN_KEYS))}")
    if not isinstance(table.get("name"), str) or not table["name"]:
        raise ThemeFileError(f'{file.name}: no name; add name = "my-theme"')
    if "primary" not in table:
        raise ThemeFileError(f'{file.name}: no primary colour; add primary = "#5fa8e8"')
    variables = table.get("variables", {})
    if not isinstance(variables, dict):
        raise ThemeFileError(f"{file.name}: variables must be a [variables] table")
    for key in _COLOR_KEYS:
        if key in table:
            _check_color(file, key, table[key])
    for key in PLOT_VARIABLES:
        if key in variables:
            _check_color(file, f"variables.{key}", variables[key])
    for key in ("dark", "ansi"):
        if key in table and not isinstance(table[key], bool):
            raise ThemeFileError(f"{file.name}: {key} must be true or false")
    return Theme(**{**table, "variables": {str(k): str(v) for k, v in variables.items()}})


def _check_color(file: Path, key: str, value: object) -> None:
    try:
        if not isinstance(value, str):
            raise TypeError(value)
        Color.parse(value)
    except (ColorParseError, TypeError, ValueError):
        raise ThemeFileError(f"{file.name}: {key} = {value!r} is not a colour; use \"#rrggbb\", "
                             "a colour name or ansi_red and the like") from None


def plot_variable_defaults(theme: Theme) -> dict[str, str]:
    """kiwb's plot colours for a theme that does not set them, from its standard colours."""
    defaults = {}
    for variable, source in PLOT_VARIABLES.items():
        value = getattr(theme, source, None) or theme.primary
        defaults[variable] = value
    return defaults


def choose_theme(requested: str | None, available: set[str],
                 color_system: str | None) -> tuple[str, str | None]:
    """The theme to start with, and a note when the requested one does not exist.

    Without a request: kiwb-dark, or kiwb-ansi in a terminal of 16 colours or fewer.
    """
    wanted = requested or (ANSI_THEME if few_colours(color_system) else DEFAULT_THEME)
    fallback = DEFAULT_THEME if DEFAULT_THEME in available else FALLBACK_THEME
    chosen = wanted if wanted in available else fallback
    if requested is None or requested == chosen:
        return chosen, None
    known = ", ".join(sorted(name for name in available if name.startswith("kiwb")))
    return chosen, (f"no theme {requested!r}; using {chosen} (kiwb themes: {known}; "
                    "ctrl+p → theme lists them all)")


def few_colours(color_system: str | None) -> bool:
    """Whether a terminal with this Rich colour system has only the 16 ANSI colours (or none)."""
    return color_system in (None, "standard", "windows")
