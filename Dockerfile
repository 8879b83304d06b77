# graph-memory container image.
#
#   docker build -t graph-memory .
#   docker run -i --rm -v graph-memory:/data graph-memory              # stdio MCP server
#   docker run --rm -p 127.0.0.1:8000:8000 -v graph-memory:/data \
#       -e MEMORY_TRANSPORT=http -e MEMORY_HTTP_HOST=0.0.0.0 graph-memory   # streamable HTTP at /mcp
#
# Offline build, for machines where neither a registry nor PyPI is reachable from inside builds:
#   .ci/docker-setup.sh                                        # engine + local base image (debootstrap)
#   python -m pip wheel --wheel-dir wheelhouse '.[postgres]' hatchling   # on the host; wheelhouse/ is git-ignored
#   docker build -t graph-memory \
#       --build-arg PYTHON_IMAGE=graph-memory-base:bookworm \
#       --build-arg PIP_NO_INDEX=1 --build-arg PIP_FIND_LINKS=/wheels .
# (hatchling is in the wheelhouse because pip builds the project's wheel in an isolated build
# environment that must find the build backend there too.)
#
# Works with any Debian-based Python image: the official python:*-slim images (python at
# /usr/local/bin) and a debootstrap Debian with python3 + python3-venv (python at /usr/bin).

ARG PYTHON_IMAGE=python:3.12-slim

# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS builder

# Lets tools find (and prune) leftover builder-stage images: `docker image prune --filter
# label=org.opencontainers.image.title=graph-memory`.
LABEL org.opencontainers.image.title="graph-memory" io.graph-memory.stage="builder"

# Unset unless passed with --build-arg; pip reads them from the environment of the RUN below.
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# .dockerignore keeps the context to the package sources, pyproject.toml, migrations and the
# optional wheelhouse/ (present only for offline builds; /wheels points at it either way).
COPY . /src
RUN mkdir -p /src/wheelhouse && ln -sfn /src/wheelhouse /wheels

# Build the project's wheel (hatchling, in pip's isolated build environment), then install it
# with its dependencies and the `postgres` extra (psycopg 3 and its pool, for MEMORY_DATABASE_URL)
# into a self-contained venv at /opt/graph-memory.
RUN for v in PIP_NO_INDEX PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL; do \
        eval "[ -n \"\${$v:-}\" ]" || unset "$v"; \
    done \
 && python3 -m venv /opt/graph-memory \
 && /opt/graph-memory/bin/python -m pip wheel --no-deps --wheel-dir /dist . \
 && wheel="$(ls /dist/*.whl)" \
 && /opt/graph-memory/bin/python -m pip install "${wheel}[postgres]" \
 && /opt/graph-memory/bin/graph-memory --version

# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}

LABEL org.opencontainers.image.title="graph-memory" \
      org.opencontainers.image.description="Knowledge-graph memory MCP server (SQLite), drop-in for @modelcontextprotocol/server-memory" \
      org.opencontainers.image.licenses="MIT"

# Init: tini (PID 1) forwards SIGTERM/SIGINT to the server and reaps zombies, so `docker stop`
# stops it promptly. Debian's `tini` package provides /usr/bin/tini. The local debootstrap base
# image already includes it (apt inside `docker build` has no network on machines without a
# registry); on the official python images it is installed here from Debian.
RUN if ! command -v tini >/dev/null 2>&1; then \
        apt-get update \
     && apt-get install -y --no-install-recommends tini \
     && rm -rf /var/lib/apt/lists/*; \
    fi \
 && test -x /usr/bin/tini

# Fixed non-root uid/gid 10001 (Kubernetes manifests set runAsUser 10001). Written directly into
# /etc/passwd when useradd is absent (debootstrap minbase does not ship `passwd`).
RUN if command -v useradd >/dev/null 2>&1; then \
        groupadd --system --gid 10001 graph-memory \
     && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /data \
            --shell /usr/sbin/nologin graph-memory; \
    else \
        echo 'graph-memory:x:10001:' >> /etc/group \
     && echo 'graph-memory:x:10001:10001:graph-memory:/data:/usr/sbin/nologin' >> /etc/passwd; \
    fi \
 && mkdir -p /data \
 && chown 10001:10001 /data \
 && chmod 0750 /data

# Code and migrations live in the venv (root-owned, read-only to the server), never under /data:
# a volume created by an older image can never shadow a newer image's code or SQL.
COPY --from=builder /opt/graph-memory /opt/graph-memory

ENV MEMORY_FILE_PATH=/data/memory.db \
    PATH=/opt/graph-memory/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 \
    PYTHONSAFEPATH=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    LANG=C.UTF-8 \
    HOME=/data

# Declared after /data is created and chowned, so a new named volume starts owned by 10001.
VOLUME /data
WORKDIR /data
USER 10001:10001

# Only used in HTTP mode (MEMORY_TRANSPORT=http, MEMORY_HTTP_HOST=0.0.0.0).
EXPOSE 8000

# Works in both transports: opens the database and checks the migrations, exit 0/1.
HEALTHCHECK --interval=30s --timeout=10s --start-period=15s --retries=3 \
    CMD ["graph-memory", "healthcheck"]

# No arguments: serve the transport named by MEMORY_TRANSPORT (default stdio), so
# `docker run -i --rm -v graph-memory:/data IMAGE` is a stdio MCP server; any arguments are
# graph-memory subcommands (`IMAGE --version`, `IMAGE export`, ...).
ENTRYPOINT ["/usr/bin/tini", "--", "graph-memory"]
CMD []
