"""Find the memory files the reference server left in its usual places (``import --discover``).

The reference server (``@modelcontextprotocol/server-memory`` 2026.8.31, ``dist/index.js``) keeps
its default ``memory.jsonl`` **in its own package folder**, next to ``dist/index.js``, and resolves a
relative ``MEMORY_FILE_PATH`` against that folder too. At start it renames an older
``dist/memory.json`` to ``memory.jsonl`` when only the former exists. A user who never set an
absolute path therefore has their memory somewhere they never chose, and after switching (our
relative paths resolve against the working directory) sees an empty graph. So we look where that
package folder ends up:

* **npx** (the README's way to run it): npm's cache, ``<cache>/_npx/<hash>/node_modules/
  @modelcontextprotocol/server-memory/dist/`` — the cache is ``$npm_config_cache``, else ``~/.npm``
  (Linux, macOS), else ``%LocalAppData%/npm-cache`` (Windows). Each version (and each cache
  clean) gets a new ``<hash>``, so one user can have several files.
* **global installs** (``npm install -g``): ``<node_modules>/@modelcontextprotocol/server-memory/
  dist/`` under ``$npm_config_prefix/lib/node_modules``, ``/usr/local/lib/node_modules`` (also
  Homebrew on Intel), ``/usr/lib/node_modules`` (distribution packages), ``/opt/homebrew/lib/
  node_modules`` (Homebrew on Apple silicon), ``~/.npm-global`` and ``~/.local`` (the usual user
  prefixes), every nvm Node (``$NVM_DIR`` or ``~/.nvm``, ``versions/node/*``), Volta's package
  image, fnm's Node versions, ``%AppData%/npm/node_modules`` and nvm-windows' versions.
* **a local install**: ``./node_modules/@modelcontextprotocol/server-memory/dist/`` of the working
  folder (npx run inside a project that installed the package uses that copy).
* **Docker**: the image's working folder is ``/app/dist``, where the reference README mounts the
  volume (``-v claude-memory:/app/dist``); graph-memory's own image sees it when mounted there too.

In each ``dist/`` folder (and its subfolders two deep, for a relative ``MEMORY_FILE_PATH`` such as
``data/memory.jsonl``) and the package folder above it (``../memory.jsonl``), a ``.jsonl``/``.json``
file counts only when its first line looks like a reference entity or relation line, so package
files (``package.json``) and empty files are left out. Everything here only reads; the environment
comes from :class:`~graph_memory.settings.NodePackagePlaces`.
"""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph_memory.hints import graph_memory_command
from graph_memory.settings import LEGACY_SUFFIXES, NodePackagePlaces
from graph_memory.wording import plural

if TYPE_CHECKING:
    from structlog.stdlib import BoundLogger

    from graph_memory.db.backend import Backend

PACKAGE = "@modelcontextprotocol/server-memory"
_PACKAGE_DIST = f"node_modules/{PACKAGE}/dist"
_GLOBAL_DIST = f"{PACKAGE}/dist"
# A reference line starts with its type: JSON.stringify keeps the key order {type, name, …}.
_REFERENCE_LINE = re.compile(rb'^\s*\{\s*"type"\s*:\s*"(entity|relation)"')
# How much of a file is read to judge its first line (a first entity can hold many observations).
_FIRST_LINE_BYTES = 1 << 20
_SUBFOLDER_DEPTH = 2


@dataclass(frozen=True, slots=True)
class Place:
    """A kind of place (``label``) and the glob of the ``dist`` folders to look in there."""

    label: str
    pattern: str


@dataclass(frozen=True, slots=True)
class ReferenceFile:
    """A memory file the reference server wrote.

    Attributes:
        path: absolute path of the file.
        place: the kind of place it was found in (``npx cache``, ``global install``, ``Docker volume``).
        package_version: the reference server version installed there (its package.json), if readable.
        size_bytes, modified: size, and modification time (ISO 8601, local time with offset).
        lines, entities, relations: non-blank lines, and how many are entity / relation lines.
        note: anything a user should know before importing it (e.g. a stale memory.json), or None.
    """

    path: Path
    place: str
    package_version: str | None
    size_bytes: int
    modified: str
    lines: int
    entities: int
    relations: int
    note: str | None

    def import_command(self, database: Path | str) -> str:
        """The shell command that imports this file into ``database`` (paths shell-quoted)."""
        return graph_memory_command("import", self.path, database=database)

    def to_dict(self, database: Path | str) -> dict[str, Any]:
        """JSON-ready: every attribute plus ``import_command``."""
        return {**asdict(self), "path": str(self.path), "import_command": self.import_command(database)}


def reference_places(env: NodePackagePlaces | None = None, home: Path | None = None) -> list[Place]:
    """The places the reference server's ``dist`` folder usually is, as globs (see the module doc).

    ``env`` defaults to the environment (``NodePackagePlaces()``), ``home`` to ``Path.home()``.
    """
    env = env if env is not None else NodePackagePlaces()
    home = home if home is not None else Path.home()
    caches = [env.npm_cache, home / ".npm", env.local_app_data and env.local_app_data / "npm-cache"]
    roots = [
        env.npm_prefix and env.npm_prefix / "lib" / "node_modules",
        env.npm_prefix and env.npm_prefix / "node_modules",  # Windows prefixes have no lib/
        Path("/usr/local/lib/node_modules"),
        Path("/usr/lib/node_modules"),
        Path("/opt/homebrew/lib/node_modules"),
        home / ".npm-global" / "lib" / "node_modules",
        home / ".local" / "lib" / "node_modules",
        (env.nvm_dir or home / ".nvm") / "versions" / "node" / "*" / "lib" / "node_modules",
        home / ".volta" / "tools" / "image" / "packages" / PACKAGE / "lib" / "node_modules",
        home / ".local" / "share" / "fnm" / "node-versions" / "*" / "installation" / "lib" / "node_modules",
        env.app_data and env.app_data / "npm" / "node_modules",
        env.app_data and env.app_data / "nvm" / "v*" / "node_modules",
    ]
    places = [Place("npx cache", f"{cache}/_npx/*/{_PACKAGE_DIST}") for cache in _unique(caches)]
    places += [Place("global install", f"{root}/{_GLOBAL_DIST}") for root in _unique(roots)]
    # npx run inside a project that has the package installed uses that local copy.
    places.append(Place("local install", f"{Path.cwd()}/{_PACKAGE_DIST}"))
    places.append(Place("Docker volume", "/app/dist"))
    return places


def _unique(paths: list[Path | None]) -> list[Path]:
    seen: list[Path] = []
    for path in paths:
        if path is not None and path not in seen:
            seen.append(path)
    return seen


def find_reference_files(places: list[Place] | None = None) -> list[ReferenceFile]:
    """The reference memory files in ``places`` (default :func:`reference_places`), newest first.

    A file reached twice (a symlinked prefix) is listed once. Unreadable folders and files are
    passed over: this only looks, it never fails.
    """
    found: dict[str, ReferenceFile] = {}
    for place in places if places is not None else reference_places():
        for dist in sorted(glob.glob(place.pattern)):
            package = Path(dist).parent
            version = _package_version(package)
            for path in _candidates(Path(dist), package):
                key = os.path.realpath(path)
                if key not in found and (ref := _inspect(path, place.label, version)) is not None:
                    found[key] = ref
    return sorted(found.values(), key=lambda r: r.modified, reverse=True)


def _candidates(dist: Path, package: Path) -> list[Path]:
    folders, level = [package, dist], [dist]
    for _ in range(_SUBFOLDER_DEPTH):
        level = [sub for folder in level for sub in _listing(folder) if sub.is_dir() and sub.name != "node_modules"]
        folders += level
    return [p for folder in folders for p in _listing(folder)
            if p.suffix.lower() in LEGACY_SUFFIXES and p.is_file()]


def _listing(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []


def _package_version(package: Path) -> str | None:
    try:
        version = json.loads((package / "package.json").read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError, AttributeError):
        return None
    return version if isinstance(version, str) else None


def _inspect(path: Path, place: str, version: str | None) -> ReferenceFile | None:
    """The file as a :class:`ReferenceFile`, or None when it does not look like reference memory."""
    try:
        with path.open("rb") as f:
            if not _looks_like_reference(f.read(_FIRST_LINE_BYTES)):
                return None
            f.seek(0)
            lines = entities = relations = 0
            for line in f:
                if not line.strip():
                    continue
                lines += 1
                kind = _line_type(line)
                entities += kind == "entity"
                relations += kind == "relation"
        stat = path.stat()
    except OSError:
        return None
    modified = datetime.fromtimestamp(stat.st_mtime).astimezone().isoformat(timespec="seconds")
    return ReferenceFile(path=path, place=place, package_version=version, size_bytes=stat.st_size,
                         modified=modified, lines=lines, entities=entities, relations=relations,
                         note=_note(path))


def _looks_like_reference(head: bytes) -> bool:
    first = head.removeprefix(b"\xef\xbb\xbf").lstrip().split(b"\n", 1)[0]
    return _line_type(first) is not None


def _line_type(line: bytes) -> str | None:
    """``entity`` / ``relation`` for a reference line, else None. The reference's own key order is
    matched without parsing; other writers' lines (another key order) are parsed."""
    match = _REFERENCE_LINE.match(line)
    if match:
        return match.group(1).decode()
    try:
        item = json.loads(line)
    except ValueError:
        return None
    kind = item.get("type") if isinstance(item, dict) else None
    return kind if kind in ("entity", "relation") else None


def _note(path: Path) -> str | None:
    # The reference server renames dist/memory.json to memory.jsonl only when memory.jsonl is absent.
    if path.name.lower() != "memory.json":
        return None
    if (path.parent / "memory.jsonl").exists():
        return "an older file the reference server no longer reads (memory.jsonl beside it is the current one)"
    return "the older name: the reference server renames it to memory.jsonl at its next start"


def render(files: list[ReferenceFile], database: Path | str, places: list[Place], *, as_json: bool) -> str:
    """The report ``import --discover`` prints: each file with the command importing it into
    ``database``, or, when none was found, where it looked."""
    if as_json:
        data = {"database": str(database), "files": [f.to_dict(database) for f in files],
                "searched": [asdict(p) for p in places]}
        return json.dumps(data, indent=2, ensure_ascii=False)
    if not files:
        looked = "\n".join(f"  {p.pattern}  ({p.label})" for p in places)
        return (f"No memory file of the reference server ({PACKAGE}) was found. Looked in:\n{looked}\n"
                f"If you gave the reference server an absolute MEMORY_FILE_PATH, that file is its memory: "
                f"{graph_memory_command('import', 'FILE', database=database)}")
    out = [f"Found {plural(len(files), 'memory file')} of the reference server ({PACKAGE}), newest first:"]
    for f in files:
        version = f", version {f.package_version}" if f.package_version else ""
        out += ["", str(f.path),
                f"  {f.place}{version}; {f.size_bytes} bytes, modified {f.modified}; {plural(f.lines, 'line')}: "
                f"{plural(f.entities, 'entity', 'entities')}, {plural(f.relations, 'relation')}"]
        if f.note:
            out.append(f"  note: {f.note}")
        out.append(f"  import it: {f.import_command(database)}")
    out += ["", "An import merges into the database: existing entities gain the observations they lack, "
                "nothing is deleted. Add --dry-run to see what it would do first."]
    return "\n".join(out)



def log_hint_if_reference_files(backend: Backend, log: BoundLogger) -> None:
    """At start, on a database holding no entity and no relation: one ``info`` line
    (``reference_memory_found``) naming the newest reference memory file and the discover command.

    Never fails the start: a problem while looking is logged at ``debug`` and passed over.
    """
    try:
        if not backend.run_read(lambda g: g.is_empty()):
            return
        files = find_reference_files(reference_places())
    except Exception as exc:  # a hint must never stop the server
        log.debug("reference_memory_search_failed", error=str(exc))
        return
    if files:
        newest = files[0]
        log.info("reference_memory_found", path=str(newest.path), entities=newest.entities,
                 relations=newest.relations, other_files=len(files) - 1,
                 hint=f"this database is empty; the reference server's memory is in that file. "
                      f"List every such file with the command importing it: "
                      f"{graph_memory_command('import', '--discover', database=backend.path)}")
