# Redis for the compose stack, tagged proctor/redis:latest by images/build.sh.
#
# Where a registry answers, the base is the public redis:7-bookworm image and this adds
# only a label. With no registry, the base is the offline Debian base and Redis comes from
# Debian's .deb files, downloaded on the host (`apt-get download`) into .wheels/debs/redis/
# and installed with dpkg: the build itself reaches no package archive.
#
# Build context (streamed by build.sh): service/redis.Dockerfile and .wheels/debs/redis/.
ARG BASE_IMAGE=redis:7-bookworm
FROM ${BASE_IMAGE}
ARG BASE_IMAGE

COPY .wheels/debs/redis/ /tmp/debs/
RUN set -eu; \
    if ! command -v redis-server >/dev/null; then \
        ls /tmp/debs/*.deb >/dev/null 2>&1 \
            || { echo "no redis-server in ${BASE_IMAGE} and no .deb files given" >&2; exit 1; }; \
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; \
        chmod 0755 /usr/sbin/policy-rc.d; \
        dpkg -i /tmp/debs/*.deb; \
        rm -f /usr/sbin/policy-rc.d; \
        mkdir -p /data; \
        chown redis:redis /data; \
    fi; \
    rm -rf /tmp/debs; \
    redis-server --version

LABEL org.proctor.component=redis \
      org.proctor.base="${BASE_IMAGE}"
WORKDIR /data
USER redis
EXPOSE 6379
# Debian's redis-server keeps protected mode on, which refuses the stack's other containers;
# the stack's Redis is reachable only on its own compose network (never published).
CMD ["redis-server", "--dir", "/data", "--appendonly", "yes", "--protected-mode", "no"]
