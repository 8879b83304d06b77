"""Settings: the only reader of the environment (``MEMORY_*`` variables).

Every value has a default that works on a fresh machine; see the settings table in README.md.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, PrivateAttr, SecretStr, ValidatorFunctionWrapHandler, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

LEGACY_SUFFIXES = (".jsonl", ".json")
LEGACY_NAMES = ("memory.jsonl", "memory.json")
DEFAULT_ALLOWED_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
DEFAULT_ALLOWED_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")


def default_database_path() -> Path:
    """``<user data dir>/memory.db``, the user data dir from platformdirs (e.g.
    ``~/.local/share/graph-memory`` on Linux, ``~/Library/Application Support/graph-memory``
    on macOS). Never inside the installed package."""
    from platformdirs import user_data_path

    return user_data_path("graph-memory", appauthor=False) / "memory.db"


POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def mask_database_url(url: str) -> str:
    """``url`` safe to log and show: ``postgresql://user:***@host:port/dbname`` (a password in
    the URL, or any query parameter other than a few harmless ones, is replaced by ``***``)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, hostinfo = netloc.rsplit("@", 1)
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:***@{hostinfo}" if ":" in userinfo else f"{user}@{hostinfo}"
        shown = {"sslmode", "connect_timeout", "application_name", "target_session_attrs", "host", "port",
                 "dbname", "user"}
        query = urlencode([(k, v if k in shown else "***") for k, v in parse_qsl(parts.query)], safe="*/")
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return url.split(":", 1)[0] + "://***"


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


# The official TypeScript client (SDK 1.x, what Node hosts run) drops a stdio message, and the
# connection with it, when its read buffer passes 10 MiB; the buffer can hold a line and up to one
# 64 KiB read beyond it. So a reply line (with its newline) of at most this many bytes is read.
DEFAULT_MAX_REPLY_BYTES = 10 * 1024 * 1024 - 64 * 1024   # 10,420,224

class Settings(BaseSettings):
    """Resolved configuration. Construct with ``Settings()`` to read the environment.

    Paths are absolute after validation: a relative ``MEMORY_FILE_PATH`` resolves against the
    working directory at start, ``~`` expands to the home folder.
    """

    # An empty variable (`"env": {"MEMORY_FILE_PATH": ""}`, compose's unset `${VAR}`) means unset, as for
    # the reference server (`if (process.env.MEMORY_FILE_PATH)`).
    model_config = SettingsConfigDict(env_prefix="MEMORY_", extra="ignore", frozen=True, env_ignore_empty=True)

    # The file path as given when it was relative, and the folder it was resolved against: messages
    # about the path say so, because the reference server resolved the same value elsewhere.
    _relative_file_path: str | None = PrivateAttr(None)
    _resolved_against: Path | None = PrivateAttr(None)

    file_path: Path = Field(
        default_factory=default_database_path,
        description="The SQLite database file; a .jsonl/.json path names a legacy file instead "
        "(database at the sibling .db, legacy contents imported on first start).",
    )
    transport: Literal["stdio", "http"] = Field("stdio", description="stdio, or http (streamable HTTP at /mcp).")
    http_host: str = Field("127.0.0.1", description="HTTP bind address.")
    http_port: int = Field(8000, ge=0, le=65535, description="HTTP port.")
    http_token: SecretStr | None = Field(None, description="When set, /mcp requires 'Authorization: Bearer <token>'.")
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_ALLOWED_HOSTS),
        description="Host header values accepted on /mcp (comma-separated; '*' port wildcard).",
    )
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_ALLOWED_ORIGINS),
        description="Origin header values accepted on /mcp (comma-separated).",
    )
    http_max_body_bytes: int = Field(
        4 * 1024 * 1024, ge=1,
        description="Largest /mcp request body in bytes; a larger one gets HTTP 413 with a JSON-RPC error.",
    )
    http_session_idle_seconds: float = Field(
        3600, gt=0, allow_inf_nan=False,
        description="Seconds a handshake-era HTTP session may go without a request in flight (an open "
        "GET stream counts) before it is closed; its id then answers 404 and the client initializes again.",
    )
    http_max_sessions: int = Field(
        1000, ge=1,
        description="Most handshake-era HTTP sessions open at once; past it a new session gets HTTP 503 "
        "with a JSON-RPC error, existing sessions keep working.",
    )
    http_view_path: str | None = Field(
        None, description="When set (e.g. /view), the read-only page of 'graph-memory view' is served under this "
        "path of the HTTP server, behind the same bearer token and Host/Origin checks as /mcp.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Log level.")
    log_format: Literal["json", "console"] | None = Field(
        None, description="json, or console; default console when stderr is a terminal, else json."
    )
    schemas_dir: Path | None = Field(None, description="Folder of <type>.schema.json files for typed tools.")
    tools: Literal["reference", "memorymesh"] = Field(
        "reference", description="The tool profile: reference (the reference server's tools) or memorymesh "
        "(MemoryMesh's static tools and response format), over the same database.")
    inverse_relations: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Declared inverse relation types, 'type:inverse' pairs separated by "
        "commas (e.g. manages:reports_to): creating a relation of one type also creates its inverse.")
    busy_timeout_ms: int = Field(10_000, ge=0, description="How long a write waits for another writer (ms).")
    max_name_length: int = Field(1024, ge=1, description="Longest entity name / type / relation type (characters).")
    max_observation_length: int = Field(65536, ge=1, description="Longest observation (characters).")
    max_batch: int = Field(10_000, ge=1, description="Most items in one tool call's batch.")
    max_reply_bytes: int = Field(
        DEFAULT_MAX_REPLY_BYTES, ge=0,
        description="Bound on the reply of any tool or the knowledge-graph resource: its JSON-RPC line, with the "
                    "newline, must be shorter than this many bytes (default: 10 MiB less 64 KiB, what the official "
                    "TypeScript client reads); others are refused saying how to get all of it (pages, summary, a "
                    "split call). 0: no bound.")
    database_url: SecretStr | None = Field(
        None, description="postgresql://user@host:port/dbname selects the PostgreSQL backend (the password from "
        "the URL, MEMORY_DATABASE_PASSWORD_FILE or libpq's PGPASSWORD/.pgpass); unset: SQLite at MEMORY_FILE_PATH.",
    )
    database_password_file: Path | None = Field(
        None, description="A file holding the PostgreSQL password (e.g. a mounted Secret); overrides the URL's.",
    )
    database_pool_size: int = Field(4, ge=1, le=100, description="PostgreSQL connections each server keeps open.")

    @classmethod
    def load(cls, **overrides: object) -> Settings:
        """The environment's settings with ``overrides`` (field name: value, e.g. a CLI option) on top.

        Raises:
            SettingsError: a value does not validate; the message names each ``MEMORY_*`` variable
                and its problem.
        """
        from pydantic import ValidationError

        from graph_memory.errors import SettingsError

        try:
            return cls.model_validate(overrides)  # pydantic validates every value
        except ValidationError as exc:
            problems = "; ".join(f"MEMORY_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}"
                                 for e in exc.errors())
            raise SettingsError(f"invalid settings: {problems}") from None

    @field_validator("database_url", mode="after")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        # The value may hold a password: nothing of it is repeated but a scheme (found by QA: the
        # first 20 characters of "password=… host=…" were).
        url = value.get_secret_value()
        if not url.startswith(POSTGRES_SCHEMES):
            scheme = url.split(":", 1)[0]
            got = (f" (got a value starting with {scheme!r}:)" if re.fullmatch(r"[A-Za-z][\w+.-]{0,19}", scheme)
                   else " (a libpq 'key=value' string is not read here)" if "=" in url else "")
            raise ValueError(f"must be a URL starting with postgresql://, such as "
                             f"postgresql://user@host:5432/dbname{got}")
        netloc = url.split("://", 1)[1].split("/", 1)[0]
        if netloc.count("@") > 1:
            # libpq ends the user and password at the first "@": the rest of the password became
            # the host name, which its errors repeat (found by QA).
            raise ValueError("its user name or password holds an '@', which a URL must write as %40 "
                             "(the value is not shown: it holds a password)")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_level(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("http_view_path", mode="after")
    @classmethod
    def _view_path(cls, value: str | None) -> str | None:
        if value is None:
            return None
        path = value.rstrip("/")
        if not re.fullmatch(r"(/[A-Za-z0-9._~-]+)+", path):
            raise ValueError(f"{value!r} is not a URL path such as /view (letters, digits, . _ ~ - between slashes)")
        if path in ("/mcp", "/healthz", "/readyz") or path.startswith("/mcp/"):
            raise ValueError(f"{path} is taken by the MCP server; choose another path such as /view")
        return path

    @field_validator("allowed_hosts", "allowed_origins", "inverse_relations", mode="before")
    @classmethod
    def _csv(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("inverse_relations", mode="after")
    @classmethod
    def _pairs(cls, value: list[str]) -> list[str]:
        from graph_memory.models import inverse_types

        pairs = []
        for item in value:
            first, colon, second = (part.strip() for part in item.partition(":"))
            if not colon or not first or not second or ":" in second:
                raise ValueError(f"{item!r} is not a pair 'type:inverse' (e.g. manages:reports_to)")
            pairs.append(f"{first}:{second}")
        inverse_types([tuple(p.split(":")) for p in pairs])  # a type paired twice is refused here
        return pairs

    @field_validator("file_path", "schemas_dir", "database_password_file", mode="after")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        return Path(value).expanduser().absolute()

    @model_validator(mode="wrap")
    @classmethod
    def _keep_relative_file_path(cls, data: object, handler: ValidatorFunctionWrapHandler) -> Settings:
        given = data.get("file_path") if isinstance(data, dict) else None
        settings: Settings = handler(data)
        if isinstance(given, str | Path) and str(given) and not Path(given).expanduser().is_absolute():
            settings._relative_file_path = str(given)
            settings._resolved_against = Path.cwd()
        return settings

    def relative_path_note(self, given_by: str = "MEMORY_FILE_PATH") -> str | None:
        """``"<given_by> was the relative path 'x.db', resolved against the working directory /y"``
        when ``file_path`` was given as a relative path, else None. ``given_by`` names where the value
        came from (``MEMORY_FILE_PATH`` or ``--database``)."""
        if self._relative_file_path is None:
            return None
        return (f"{given_by} was the relative path {self._relative_file_path!r}, resolved against the "
                f"working directory {self._resolved_against}")

    @property
    def database_path(self) -> Path:
        """The SQLite file: ``file_path`` itself, or the sibling ``.db`` of a legacy path."""
        if self.file_path.suffix.lower() in LEGACY_SUFFIXES:
            return self.file_path.with_suffix(".db")
        return self.file_path

    @property
    def database_label(self) -> Path | str:
        """The database for messages, logs and suggested commands: the SQLite file, or the
        PostgreSQL URL with its password masked (:func:`mask_database_url`)."""
        if self.database_url is not None:
            return mask_database_url(self.database_url.get_secret_value())
        return self.database_path

    @property
    def legacy_candidates(self) -> list[Path]:
        """Legacy files to import on first start, in order of preference: the legacy file that
        ``MEMORY_FILE_PATH`` names, else next to the database the ``.jsonl`` then ``.json`` of its
        name (``mymem.db``: ``mymem.jsonl``, as ``mymem.jsonl`` names ``mymem.db``; found by QA),
        then ``memory.jsonl`` and ``memory.json``."""
        if self.file_path.suffix.lower() in LEGACY_SUFFIXES:
            return [self.file_path]
        named = [self.database_path.with_suffix(suffix) for suffix in LEGACY_SUFFIXES]
        return list(dict.fromkeys([*named, *(self.database_path.parent / name for name in LEGACY_NAMES)]))

    @property
    def effective_log_format(self) -> Literal["json", "console"]:
        """``log_format``, or console when stderr is a terminal and json otherwise."""
        if self.log_format is not None:
            return self.log_format
        return "console" if sys.stderr.isatty() else "json"


class StartFallback(BaseSettings):
    """The two settings a stdio server refusing its start needs when :class:`Settings` are invalid
    (``graph_memory.cli._answer_with_refusal``): the transport, and the tool profile to list.
    Read as text, so an invalid value of another setting does not hide them."""

    model_config = SettingsConfigDict(env_prefix="MEMORY_", extra="ignore", frozen=True, env_ignore_empty=True)

    transport: str = Field("stdio", description="MEMORY_TRANSPORT as given.")
    tools: str = Field("reference", description="MEMORY_TOOLS as given.")

    @classmethod
    def load(cls, transport: str | None = None) -> StartFallback:
        """The environment's values; ``transport`` (``serve --transport``) overrides its variable."""
        return cls.model_validate({} if transport is None else {"transport": transport})

    @property
    def profile(self) -> Literal["reference", "memorymesh"]:
        """The tool profile ``tools`` names, ``reference`` when it names none."""
        return "memorymesh" if self.tools.strip() == "memorymesh" else "reference"


class NodePackagePlaces(BaseSettings):
    """Where npm and the Node version managers keep packages, read from the variables they read
    themselves (no ``MEMORY_`` prefix; unset means their defaults). Only ``graph-memory import
    --discover`` and the first-start hint use it, to find the reference server's memory files."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True)

    npm_cache: Path | None = Field(default=None, validation_alias="npm_config_cache",
                                   description="npm's cache (npx installs under its _npx folder).")
    npm_prefix: Path | None = Field(default=None, validation_alias="npm_config_prefix",
                                    description="npm's global prefix (global packages under lib/node_modules).")
    nvm_dir: Path | None = Field(default=None, validation_alias="NVM_DIR", description="nvm's folder (default ~/.nvm).")
    local_app_data: Path | None = Field(default=None, validation_alias="LOCALAPPDATA",
                                        description="Windows: holds npm-cache.")
    app_data: Path | None = Field(default=None, validation_alias="APPDATA", description="Windows: holds npm and nvm.")

    @field_validator("*", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("*", mode="after")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser().absolute()
