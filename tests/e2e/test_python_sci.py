"""The `python-sci` image in real sandboxes: the stack imports and BLAS starts under small limits.

OpenBLAS and OpenMP start a thread (and a buffer) per CPU the process sees, and a sandbox
sees every CPU of the host: the image pins each pool to one thread, so a memory or pids
limit does not kill BLAS at start-up on a large host. threadpoolctl (a scikit-learn
dependency) reports what the pools actually started with.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.e2e.helpers import episode, run

BLAS_TEST = """\
import numpy as np
import scipy.linalg
import threadpoolctl

from solution import solve


def test_blas_starts_with_one_thread_per_pool():
    np.ones((64, 64)) @ np.ones((64, 64))  # every BLAS library loaded and started
    pools = threadpoolctl.threadpool_info()
    assert pools, "no BLAS or OpenMP pool found"
    assert {pool["num_threads"] for pool in pools} == {1}, pools


def test_a_matrix_product_and_a_solve():
    a = np.random.default_rng(0).random((400, 400)) + 400 * np.eye(400)
    x = solve(a, np.ones(400))
    assert np.allclose(a @ x, np.ones(400))
    assert np.allclose(scipy.linalg.solve(a, np.ones(400)), x)
"""

STACK_TEST = """\
import matplotlib.pyplot as plt
import pandas as pd
import sklearn.linear_model
import statsmodels.api
import sympy


def test_the_rest_of_the_stack():
    assert pd.DataFrame({"a": [1, 2, 3]})["a"].sum() == 6
    x = sympy.Symbol("x")
    assert sympy.simplify(sympy.sin(x) ** 2 + sympy.cos(x) ** 2) == 1
    model = sklearn.linear_model.LinearRegression().fit([[0], [1], [2]], [0, 2, 4])
    assert round(float(model.coef_[0]), 6) == 2.0
    fit = statsmodels.api.OLS([0.0, 2.0, 4.0], [[0.0], [1.0], [2.0]]).fit()
    assert round(float(fit.params[0]), 6) == 2.0
    plt.plot([1, 2])
    plt.savefig("plot.png")  # the Agg backend: no display in a sandbox


def test_pytest_mock_stays_a_fixture(mocker):
    assert mocker.patch("os.getcwd", return_value="/x")() == "/x"
"""

SOLVE = "import numpy as np\n\n\ndef solve(a, b):\n    return np.linalg.solve(a, b)\n"


def sci_episode(solution: str, tests: str, **limits: Any) -> dict[str, Any]:
    body = episode(solution, tests=tests, **limits)
    body["task"]["image"] = "python-sci"
    return body


def outcomes(result: dict[str, Any]) -> dict[str, str]:
    return {t["name"]: t["outcome"] for t in result["tests"]}


def test_blas_runs_under_256_mb_and_64_pids(http: httpx.Client) -> None:
    result = run(http, sci_episode(SOLVE, BLAS_TEST, memory_mb=256, pids=64, timeout_s=60))
    assert result["verdict"] == "passed", (outcomes(result), result["stdout"][-3000:])
    assert len(outcomes(result)) == 2


def test_the_rest_of_the_stack_imports(http: httpx.Client) -> None:
    result = run(http, sci_episode("", STACK_TEST, timeout_s=90), wait=180)
    assert result["verdict"] == "passed", (outcomes(result), result["stdout"][-3000:])


def test_the_python_image_stays_without_the_stack(http: httpx.Client) -> None:
    probe = "import importlib.util\n\n\ndef test_no_numpy():\n"
    probe += "    assert importlib.util.find_spec('numpy') is None\n"
    result = run(http, episode("", tests=probe))
    assert result["verdict"] == "passed", result["stdout"][-2000:]


ARRAY_ASSERTS = """\
import numpy as np
from solution import solve

a = np.array([[3.0, 1.0], [1.0, 2.0]])
x = solve(a, np.array([9.0, 8.0]))
assert isinstance(x, np.ndarray) and x.shape == (2,) and x.dtype == np.float64
assert np.allclose(x, [2.0, 3.0])
assert solve(np.eye(2, dtype=np.int64), np.array([1, 2])).tolist() == [1.0, 2.0]
"""


def test_numpy_arrays_cross_split_grading_as_data(http: httpx.Client) -> None:
    """The `assert` format is graded split here too: an array of numbers the solution
    returns reaches the tests as an array (its dtype, shape and bytes), not a handle."""
    body = sci_episode(SOLVE, ARRAY_ASSERTS, timeout_s=60)
    body["task"]["tests"]["format"] = "assert"
    result = run(http, body)
    assert (result["verdict"], result["reward"]) == ("passed", 1.0), result["stderr"][-2000:]
