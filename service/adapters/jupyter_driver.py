"""The program `/run_jupyter` runs in the sandbox: notebook cells in order, in one namespace.

Not imported by the service: its source is the test command's program (`jupyter.py`), run
by the sandbox's `python3` in the workspace like any `/run_code` program. It does what a
Jupyter kernel does for SandboxFusion's driver, without a kernel: each cell's stdout and
stderr are its own, a cell whose last statement is an expression displays that value
(`text/plain`, its repr), the figures matplotlib holds at a cell's end are displayed as PNG
(as the inline backend shows them), an exception is the cell's `error` (name, value,
traceback) and the next cell runs all the same. Standard library only (matplotlib if the
cells imported it). The per-cell outputs go, as JSON, to the file named in the config,
which the worker reads back after the run.
"""

from __future__ import annotations

import ast
import base64
import io
import json
import signal
import sys
import traceback
from types import FrameType
from typing import Any

CONFIG = ".proctor-jupyter.json"


class CellTimeout(Exception):
    """The cell ran past `cell_timeout`."""


def on_alarm(signum: int, frame: FrameType | None) -> None:
    raise CellTimeout("the cell ran out of its time")


def capped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit]


def bundle(value: object) -> dict[str, Any]:
    """A value's display data: its repr, and the rich forms it offers as IPython reads them."""
    data: dict[str, Any] = {"text/plain": repr(value)}
    for method, mime in (("_repr_html_", "text/html"), ("_repr_png_", "image/png")):
        render = getattr(value, method, None)
        if callable(render) and not isinstance(value, type):
            try:
                shown = render()
            except Exception:  # a broken rich form: the plain one stays
                continue
            if isinstance(shown, bytes):
                shown = base64.b64encode(shown).decode("ascii")
            if isinstance(shown, str):
                data[mime] = shown
    return data


def figures() -> list[dict[str, Any]]:
    """The open matplotlib figures as PNG displays, then closed (the inline backend's way)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return []
    shown = []
    for number in pyplot.get_fignums():
        figure = pyplot.figure(number)
        png = io.BytesIO()
        figure.savefig(png, format="png")
        shown.append(
            {
                "image/png": base64.b64encode(png.getvalue()).decode("ascii"),
                "text/plain": repr(figure),
            }
        )
    pyplot.close("all")
    return shown


def run_cell(
    source: str, index: int, namespace: dict[str, Any], timeout_s: float, limit: int
) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    cell: dict[str, Any] = {"stdout": "", "stderr": "", "display": [], "error": []}

    def display(*values: object) -> None:
        cell["display"].extend(bundle(value) for value in values)

    namespace["display"] = display
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    if timeout_s > 0:
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        name = f"<cell {index}>"
        tree = ast.parse(source, filename=name)
        last = None
        final = tree.body[-1] if tree.body else None
        if isinstance(final, ast.Expr):
            tree.body.pop()
            last = ast.Expression(final.value)
        exec(compile(tree, name, "exec"), namespace)
        if last is not None:
            value = eval(compile(last, name, "eval"), namespace)
            if value is not None:
                namespace["_"] = value
                cell["display"].append(bundle(value))
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: a kernel goes on
        cell["error"].append(
            {
                "ename": type(exc).__name__,
                "evalue": str(exc),
                "traceback": traceback.format_exception(type(exc), exc, exc.__traceback__),
            }
        )
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.stdout, sys.stderr = saved
    try:
        cell["display"] += figures()
    except Exception as exc:  # a figure that cannot be drawn is that cell's error
        cell["error"].append({"ename": type(exc).__name__, "evalue": str(exc), "traceback": []})
    cell["stdout"], cell["stderr"] = capped(out.getvalue(), limit), capped(err.getvalue(), limit)
    return cell


def main() -> None:
    with open(CONFIG) as handle:
        config = json.load(handle)
    signal.signal(signal.SIGALRM, on_alarm)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    cells = []
    for index, path in enumerate(config["cells"]):
        with open(path) as handle:
            source = handle.read()
        cells.append(
            run_cell(source, index, namespace, config["cell_timeout"], config["stream_chars"])
        )
    with open(config["result"], "w") as handle:
        json.dump({"cells": cells}, handle)


if __name__ == "__main__":
    main()
