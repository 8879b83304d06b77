#!/usr/bin/env bash
# Provide a Docker engine and the local base image for graph-memory's container tests.
#
# Idempotent and non-interactive (safe under CI=true with no stdin). Steps:
#   1. If `docker info` fails: install docker.io with apt when the engine is missing, start dockerd
#      in the background (log: /tmp/dockerd.log) and wait up to ~60 s for it to answer.
#   2. Ensure the base image graph-memory-base:bookworm exists; otherwise build it with debootstrap
#      from the Debian mirror named in this machine's apt sources and `docker import` it
#      (no container registry is reachable here: see ../shared/docs/CONTAINERS.md).
#
# Exit status: 0 when done, and also 0 (with a clear message) when no engine or base image can be
# had on this machine; the integration tests then skip and say why. Non-zero means a bug here.
#
# Environment knobs (all optional):
#   GM_BASE_IMAGE    image name to produce      (default graph-memory-base:bookworm)
#   GM_BASE_SUITE    Debian suite               (default bookworm)
#   GM_BASE_INCLUDE  extra packages             (default python3,python3-venv,ca-certificates,tini)
#   GM_DEBIAN_MIRROR mirror URL override        (default: read from /etc/apt/sources.list{,.d/*})
#   GM_DOCKER_WAIT   seconds to wait for dockerd (default 60)
set -euo pipefail

BASE_IMAGE="${GM_BASE_IMAGE:-graph-memory-base:bookworm}"
SUITE="${GM_BASE_SUITE:-bookworm}"
# tini is part of the base image: `apt-get` inside `docker build` has no network on these machines,
# but debootstrap runs on the host and can fetch it from the same mirror.
INCLUDE="${GM_BASE_INCLUDE:-python3,python3-venv,ca-certificates,tini}"
WAIT_SECONDS="${GM_DOCKER_WAIT:-60}"
DOCKERD_LOG=/tmp/dockerd.log
LOCK_FILE=/tmp/graph-memory-docker-setup.lock
START_TIME=$SECONDS

log() { printf '[docker-setup +%3ds] %s\n' "$((SECONDS - START_TIME))" "$*" >&2; }
give_up() {
    # The machine cannot provide what we need: not a script bug, so exit 0; tests will skip.
    log "NOTICE: $* -- container integration tests will be skipped on this machine."
    exit 0
}

export DEBIAN_FRONTEND=noninteractive

# One run at a time (CI and a developer may start this concurrently).
if { exec 9>>"$LOCK_FILE"; } 2>/dev/null && command -v flock >/dev/null 2>&1; then
    flock 9
else
    log "(running without the lock file $LOCK_FILE)"
fi

docker_bin() {
    # Prefer the Debian client: another client on PATH may need buildx for BuildKit.
    if [ -x /usr/bin/docker ]; then echo /usr/bin/docker; else command -v docker || true; fi
}

engine_answers() {
    local d
    d="$(docker_bin)"
    [ -n "$d" ] && "$d" info >/dev/null 2>&1
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo -n "$@"
    else
        return 1
    fi
}

APT_LOG=/tmp/graph-memory-apt.log
apt_install() {
    # apt_install PKG... ; returns non-zero if it cannot be done (output: $APT_LOG)
    log "apt-get update && apt-get install $* (log: $APT_LOG)"
    if ! { as_root apt-get update -q && as_root apt-get install -y -q --no-install-recommends "$@"; } \
            >>"$APT_LOG" 2>&1 </dev/null; then
        tail -n 20 "$APT_LOG" >&2 || true
        return 1
    fi
}

dockerd_running() {
    local pid
    [ -f /var/run/docker.pid ] || return 1
    pid="$(cat /var/run/docker.pid 2>/dev/null || true)"
    [ -n "$pid" ] && [ -d "/proc/$pid" ]  # kill -0 would fail with EPERM for a non-root user
}

# --- 1. engine ---------------------------------------------------------------------------------
if engine_answers; then
    log "Docker engine already answers ($("$(docker_bin)" version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))."
else
    if [ ! -x /usr/bin/docker ] || ! command -v dockerd >/dev/null 2>&1; then
        apt_install docker.io || give_up "could not install docker.io with apt"
    fi
    info_error="$("$(docker_bin)" info 2>&1 || true)"
    if [[ "${info_error,,}" == *"permission denied"* ]]; then
        give_up "dockerd runs but user $(id -un) may not use its socket (add the user to the docker group)"
    fi
    if dockerd_running; then
        log "dockerd is already running (pid $(cat /var/run/docker.pid)); waiting for it."
    else
        log "Starting dockerd in the background (log: $DOCKERD_LOG)."
        if [ "$(id -u)" -eq 0 ]; then
            # 9>&-: the daemon must not inherit (and hold forever) this script's lock.
            nohup setsid dockerd >"$DOCKERD_LOG" 2>&1 </dev/null 9>&- &
        elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo -n sh -c "nohup setsid dockerd >'$DOCKERD_LOG' 2>&1 </dev/null &" 9>&-
        else
            give_up "no Docker engine answers and this user cannot start dockerd (not root, no sudo)"
        fi
    fi
    waited=0
    until engine_answers; do
        if [ "$waited" -ge "$WAIT_SECONDS" ]; then
            log "dockerd did not answer within ${WAIT_SECONDS}s; last lines of $DOCKERD_LOG:"
            tail -n 20 "$DOCKERD_LOG" >&2 2>/dev/null || true
            give_up "the Docker engine did not start"
        fi
        sleep 1
        waited=$((waited + 1))
    done
    log "Docker engine is up ($(/usr/bin/docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))."
fi
DOCKER="$(docker_bin)"

# --- 2. base image -----------------------------------------------------------------------------
if "$DOCKER" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    log "Base image $BASE_IMAGE already exists."
    exit 0
fi

find_mirror() {
    # Print the first Debian mirror serving "$SUITE" (exact suite, type deb) in the apt sources.
    # Handles one-line *.list files and deb822 *.sources files; disabled files are ignored.
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        # deb [options] URI SUITE COMPONENT...
        awk -v suite="$SUITE" '
            /^[[:space:]]*#/ { next }
            $1 == "deb" {
                i = 2
                if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                if ($(i + 1) == suite) { print $i; exit }
            }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v suite="$SUITE" '
            function flush() {
                if (types ~ /(^|[[:space:]])deb([[:space:]]|$)/ && enabled != "no") {
                    n = split(suites, s, /[[:space:]]+/)
                    for (k = 1; k <= n; k++) if (s[k] == suite) { split(uris, u, /[[:space:]]+/); print u[1]; exit }
                }
                types = ""; uris = ""; suites = ""; enabled = ""
            }
            /^[[:space:]]*#/ { next }
            /^[[:space:]]*$/ { flush(); next }
            {
                key = tolower($1); sub(/:$/, "", key)
                val = $0; sub(/^[^:]*:[[:space:]]*/, "", val)
                if (key == "types") types = val
                else if (key == "uris") uris = val
                else if (key == "suites") suites = val
                else if (key == "enabled") enabled = tolower(val)
            }
            END { flush() }' "$f"
    done
}

MIRROR="${GM_DEBIAN_MIRROR:-$(find_mirror | head -n 1)}"
if [ -z "$MIRROR" ]; then
    MIRROR=http://deb.debian.org/debian
    log "No $SUITE mirror found in the apt sources; falling back to $MIRROR."
fi

if ! command -v debootstrap >/dev/null 2>&1; then
    apt_install debootstrap || give_up "could not install debootstrap with apt, so no base image"
fi

ROOTFS="$(mktemp -d /var/tmp/graph-memory-rootfs.XXXXXX)"
cleanup() {
    # debootstrap mounts /proc etc. inside the target; never delete through a live mount.
    if [ -n "${ROOTFS:-}" ] && [ -d "$ROOTFS" ]; then
        awk -v r="$ROOTFS/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r |
            while IFS= read -r m; do as_root umount -l "$m" 2>/dev/null || true; done
        as_root rm -rf --one-file-system "$ROOTFS" || true
    fi
}
trap cleanup EXIT

log "Building $BASE_IMAGE: debootstrap --variant=minbase --include=$INCLUDE $SUITE from $MIRROR (takes a few minutes)."
if ! as_root debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$ROOTFS" "$MIRROR" \
        >/tmp/graph-memory-debootstrap.log 2>&1 </dev/null; then
    tail -n 20 /tmp/graph-memory-debootstrap.log >&2 || true
    give_up "debootstrap failed (full log: /tmp/graph-memory-debootstrap.log), so no base image"
fi

# Slim the image: no downloaded .debs or package lists (apt can refetch them).
as_root rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
    "$ROOTFS"/var/log/* "$ROOTFS"/tmp/* || true

log "Importing the root filesystem as $BASE_IMAGE."
as_root tar --numeric-owner -C "$ROOTFS" -c . |
    "$DOCKER" import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["/usr/bin/python3"]' \
        --change "LABEL org.opencontainers.image.description=\"Debian $SUITE minbase with $INCLUDE (debootstrap from $MIRROR)\"" \
        - "$BASE_IMAGE" >&2

"$DOCKER" run --rm "$BASE_IMAGE" python3 -c 'import sys, venv; print("base image python", sys.version.split()[0])' >&2
log "Base image $BASE_IMAGE is ready."
