"""Numbered plain-SQL migrations of the apistore, applied in order at start-up."""

from pathlib import Path

DIRECTORY = Path(__file__).resolve().parent


def files() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migration, in version order."""
    found = []
    for path in sorted(DIRECTORY.glob("[0-9][0-9][0-9][0-9]_*.sql")):
        found.append((int(path.name[:4]), path.stem, path.read_text()))
    return found
