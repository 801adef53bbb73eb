#!/usr/bin/env bash
# Bootstrap the offline base image proctor/base:bookworm from Debian packages alone.
#
# Air-gapped clusters (common in RL) have no container registry, but they do have a
# Debian mirror. debootstrap builds a minimal bookworm root filesystem from that mirror
# and `docker import` turns it into an image, so the sandbox images can be built with no
# registry at all. The image build (`proctor images build`) calls this when a base cannot
# be pulled.
#
# Usage: images/base/bootstrap.sh            (rebuilds and replaces the tag unconditionally)
# Env:   BASE_TAG       image tag to create              (default proctor/base:bookworm)
#        DEBIAN_MIRROR  mirror to debootstrap from       (default: the host's apt mirror)
set -euo pipefail

readonly SUITE=bookworm
readonly TAG="${BASE_TAG:-proctor/base:${SUITE}}"
readonly DEFAULT_MIRROR=http://deb.debian.org/debian
# What the sandbox needs on top of minbase (Essential + apt). bash, coreutils, tar and
# util-linux are Essential already; they are listed because the sandbox relies on them.
#   python3-pip  installs the host-built pytest wheels at image build time. Debian disables
#                `python3 -m ensurepip` for the system interpreter, so the alternative would
#                be unzipping wheels by hand (no entry points, no RECORD); pip is simpler.
#   python3-venv `python3 -m venv` works in python:3.12-slim, and repository tasks use it;
#                keeping it here keeps the two bases interchangeable (about 4 MB).
readonly PACKAGES=python3,python3-pip,python3-venv,git,bash,coreutils,procps,ca-certificates,tar,util-linux

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/../.." && pwd)"
rootfs="${repo}/images/.rootfs/base-${SUITE}"
log="${repo}/.run/debootstrap.log"

die() { echo "bootstrap: $*" >&2; exit 1; }

# The first mirror the host's apt uses for $SUITE itself (not -security, not -updates).
host_mirror() {
    local uri=""
    if [[ -r /etc/apt/sources.list.d/debian.sources ]]; then
        uri="$(awk -v suite="${SUITE}" '
            BEGIN { RS = ""; FS = "\n" }
            {
                types = ""; uris = ""; suites = ""
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^Types:/)  { types = $i;  sub(/^Types:[ \t]*/, "", types) }
                    if ($i ~ /^URIs:/)   { uris = $i;   sub(/^URIs:[ \t]*/, "", uris) }
                    if ($i ~ /^Suites:/) { suites = $i; sub(/^Suites:[ \t]*/, "", suites) }
                }
                if ((" " types " ") ~ / deb / && (" " suites " ") ~ (" " suite " ")) {
                    split(uris, u, /[ \t]+/); print u[1]; exit
                }
            }' /etc/apt/sources.list.d/debian.sources)"
    fi
    if [[ -z "${uri}" && -r /etc/apt/sources.list ]]; then
        uri="$(awk -v suite="${SUITE}" '
            $1 == "deb" {
                i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i + 1) == suite) { print $i; exit }
            }' /etc/apt/sources.list)"
    fi
    case "${uri}" in
        http://* | https://* | file://*) echo "${uri%/}" ;;
        *) echo "${DEFAULT_MIRROR}" ;;
    esac
}

# debootstrap mounts /proc and /sys (and on some hosts /dev) inside the target. A failed
# run can leave them mounted, and rm -rf must never walk into the host's /proc or /dev.
remove_rootfs() {
    [[ -e "${rootfs}" ]] || return 0
    awk -v r="${rootfs}" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts \
        | sort -r | while read -r mnt; do umount -l "${mnt}" || true; done
    rm -rf --one-file-system "${rootfs}"
}

# Trim the tree the way debian:bookworm-slim is trimmed, and keep future apt installs
# trimmed too: documentation and translations are dead weight in a sandbox.
minimize() {
    local r="$1"
    mkdir -p "${r}/etc/dpkg/dpkg.cfg.d"
    cat >"${r}/etc/dpkg/dpkg.cfg.d/docker-minimal" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
CFG
    find "${r}/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    find "${r}/usr/share/doc" -mindepth 1 -type d -empty -delete
    find "${r}/usr/share/man" "${r}/usr/share/info" "${r}/usr/share/lintian" \
        -mindepth 1 -delete 2>/dev/null || true
    find "${r}/usr/share/locale" -mindepth 1 -not -name locale.alias -delete
    # apt state and caches: rebuilt by `apt-get update` when anyone needs them.
    rm -rf "${r}"/var/lib/apt/lists/* "${r}"/var/cache/apt/*.bin "${r}"/var/cache/apt/archives/*.deb
    mkdir -p "${r}/var/lib/apt/lists/partial"
    find "${r}/var/log" -type f -delete
    # Host identity that debootstrap copied in; Docker provides these per container.
    : >"${r}/etc/resolv.conf"
    : >"${r}/etc/hostname"
    : >"${r}/etc/machine-id" 2>/dev/null || true
    # The engine creates /dev per container; device nodes in a layer are only trouble.
    find "${r}/dev" -mindepth 1 -delete
}

main() {
    [[ "${EUID}" -eq 0 ]] || die "must run as root (debootstrap needs chroot and mknod)"
    command -v debootstrap >/dev/null || die "debootstrap is not installed (scripts/setup.sh installs it)"
    command -v docker >/dev/null || die "docker is not installed"

    local mirror="${DEBIAN_MIRROR:-$(host_mirror)}"
    local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    [[ -r "${keyring}" ]] || die "${keyring} missing: install debian-archive-keyring"

    mkdir -p "$(dirname "${rootfs}")" "$(dirname "${log}")"
    trap remove_rootfs EXIT
    remove_rootfs

    echo "bootstrap: debootstrap --variant=minbase ${SUITE} from ${mirror} (log: ${log#"${repo}"/})"
    local t0=${SECONDS}
    # Each log line is stamped with seconds since the start: a slow mirror shows at a glance.
    if ! debootstrap --variant=minbase --components=main --keyring="${keyring}" \
        --include="${PACKAGES}" "${SUITE}" "${rootfs}" "${mirror}" 2>&1 \
        | while IFS= read -r line; do printf '%4d %s\n' $((SECONDS - t0)) "${line}"; done \
            >"${log}"; then
        tail -n 20 "${log}" >&2
        die "debootstrap failed"
    fi
    local t1=${SECONDS}

    minimize "${rootfs}"
    local created previous
    created="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    previous="$(docker image inspect -f '{{.Id}}' "${TAG}" 2>/dev/null || true)"
    tar --numeric-owner -C "${rootfs}" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change "LABEL org.proctor.base.suite=${SUITE} org.proctor.base.mirror=${mirror} org.proctor.base.created=${created}" \
        --change 'CMD ["bash"]' \
        --message "debootstrap --variant=minbase ${SUITE} ${mirror} +${PACKAGES}" \
        - "${TAG}" >/dev/null
    local t2=${SECONDS}
    # The replaced base goes unless images built from it still hold it (docker refuses then).
    if [[ -n "${previous}" ]]; then docker rmi "${previous}" >/dev/null 2>&1 || true; fi
    remove_rootfs
    rmdir "$(dirname "${rootfs}")" 2>/dev/null || true
    local t3=${SECONDS}

    local id size
    id="$(docker image inspect -f '{{.Id}}' "${TAG}")"
    size="$(docker image inspect -f '{{.Size}}' "${TAG}")"
    echo "bootstrap: ${TAG} ${id} $((size / 1000000)) MB in $((t3 - t0)) s" \
        "(debootstrap $((t1 - t0)) s, trim+import $((t2 - t1)) s, cleanup $((t3 - t2)) s)"
}

main "$@"
