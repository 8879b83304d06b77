"""Settings: defaults, MEMORY_* variables, and where the database and legacy file are."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph_memory.settings import Settings, default_database_path


def test_default_database_is_in_the_user_data_dir_not_the_package() -> None:
    import graph_memory

    settings = Settings()
    assert settings.database_path == default_database_path()
    assert settings.database_path.name == "memory.db"
    assert "graph-memory" in settings.database_path.parts
    package_dir = Path(graph_memory.__file__).resolve().parent
    assert package_dir not in settings.database_path.resolve().parents


def test_relative_path_resolves_against_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_FILE_PATH", "sub/dir/mem.db")
    assert Settings().database_path == tmp_path / "sub" / "dir" / "mem.db"


@pytest.mark.parametrize("legacy_name", ["memory.jsonl", "memory.json", "Notes.JSONL"])
def test_legacy_path_means_sibling_database_and_import_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             legacy_name: str) -> None:
    monkeypatch.setenv("MEMORY_FILE_PATH", str(tmp_path / legacy_name))
    settings = Settings()
    assert settings.database_path == (tmp_path / legacy_name).with_suffix(".db")
    assert settings.legacy_candidates == [tmp_path / legacy_name]


def test_database_path_looks_for_legacy_files_beside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_FILE_PATH", str(tmp_path / "x.db"))
    assert Settings().legacy_candidates == [tmp_path / "x.jsonl", tmp_path / "x.json", tmp_path / "memory.jsonl",
                                            tmp_path / "memory.json"]
    monkeypatch.setenv("MEMORY_FILE_PATH", str(tmp_path / "memory.db"))
    assert Settings().legacy_candidates == [tmp_path / "memory.jsonl", tmp_path / "memory.json"]


def test_every_documented_variable_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env = {
        "MEMORY_TRANSPORT": "http", "MEMORY_HTTP_HOST": "0.0.0.0", "MEMORY_HTTP_PORT": "9001",
        "MEMORY_HTTP_TOKEN": "s3cret", "MEMORY_ALLOWED_HOSTS": "a:*, b:80",
        "MEMORY_ALLOWED_ORIGINS": "http://a:*", "MEMORY_LOG_LEVEL": "DEBUG", "MEMORY_LOG_FORMAT": "console",
        "MEMORY_SCHEMAS_DIR": str(tmp_path), "MEMORY_MAX_BATCH": "7",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    s = Settings()
    assert (s.transport, s.http_host, s.http_port) == ("http", "0.0.0.0", 9001)
    assert s.http_token is not None and s.http_token.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(s)
    assert s.allowed_hosts == ["a:*", "b:80"] and s.allowed_origins == ["http://a:*"]
    assert (s.log_level, s.log_format, s.schemas_dir, s.max_batch) == ("debug", "console", tmp_path, 7)


def test_invalid_transport_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    monkeypatch.setenv("MEMORY_TRANSPORT", "carrier-pigeon")
    with pytest.raises(ValidationError):
        Settings()


def test_postgres_driver_advice_installs_the_extra_into_this_interpreter(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    """Without psycopg, a PostgreSQL URL is refused saying how to install the driver into the
    interpreter that runs graph-memory, by the `postgres` extra's own requirement: the advice
    `pip install 'graph-memory[postgres]'` fetched another project of that name (found by QA)."""
    import sys
    import tomllib

    from graph_memory.db.backend import POSTGRES_DRIVER, open_backend
    from graph_memory.errors import StoreError
    from graph_memory.settings import Settings

    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras["postgres"] == [POSTGRES_DRIVER]
    monkeypatch.setitem(sys.modules, "graph_memory.db.postgres.backend", None)   # import fails
    settings = Settings.load(database_url="postgresql://u@127.0.0.1:1/x", file_path=tmp_path / "m.db")
    with pytest.raises(StoreError) as refused:
        open_backend(settings, "migrate")
    assert f"{sys.executable} -m pip install '{POSTGRES_DRIVER}'" in str(refused.value)
    assert "graph-memory[postgres]" not in str(refused.value)


@pytest.mark.parametrize("url", ["postgresql://app:hunter2@TopSecretTail@127.0.0.1:5432/memory",
                                 "password=S3cretPW host=localhost dbname=memory",
                                 "user:S3cretPW@localhost/memory"])
def test_a_database_url_is_refused_without_repeating_any_of_its_secret(url: str) -> None:
    """QA: an unencoded '@' in the password made libpq take its tail for the host name, which its
    errors repeated (to the client too, in a refused start); a libpq keyword string had its first
    20 characters repeated."""
    from graph_memory.errors import SettingsError

    with pytest.raises(SettingsError) as refused:
        Settings.load(database_url=url)
    message = str(refused.value)
    assert "MEMORY_DATABASE_URL" in message
    assert not any(secret in message for secret in ("hunter2", "TopSecret", "S3cret", "host=localhost"))
    if url.startswith("postgresql://"):
        assert "%40" in message
