# Sandbox runtime for a language that runs from npm packages (jest): another language image
# (node) plus the family's node_modules, installed on the host by `npm ci` from the lock file
# in npm/<family>/ (proctor/imagebuild/npm.py). The build copies them in and reaches no
# registry; it runs with --network none.
#
# Build context: sandbox-lang/npm.Dockerfile, sandbox-lang/smoke/<family>.sh, npm/ (the
# installed directory).
ARG BASE_IMAGE=proctor/sandbox-node:latest
FROM ${BASE_IMAGE}
ARG BASE_IMAGE
ARG FAMILY

USER 0:0
COPY npm/ /opt/proctor/${FAMILY}/
COPY smoke.sh /usr/local/lib/proctor/smoke-${FAMILY}.sh
RUN chmod -R a+rX /opt/proctor

USER 1000:1000
RUN mkdir /tmp/smoke && cd /tmp/smoke && bash /usr/local/lib/proctor/smoke-${FAMILY}.sh \
    && rm -rf /tmp/* /tmp/.cache
LABEL org.proctor.runtime="${FAMILY}" \
      org.proctor.base="${BASE_IMAGE}"
WORKDIR /workspace
CMD ["sleep", "infinity"]
