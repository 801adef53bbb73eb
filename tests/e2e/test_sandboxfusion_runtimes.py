"""What SandboxFusion's runtimes give programs, through Proctor's `/run_code` and
`/run_jupyter` over HTTP (real Redis, real Docker): TypeScript as tsx runs it, the libraries
its images bundle (lodash, javatuples, testify: nothing downloaded), `fetch_files` with a
writable /mnt that the next episode does not see, and notebook cells. The requests and the
assertions re-express SandboxFusion's own tests (sandbox/tests/runners/test_typescript.py,
test_nodejs.py, test_java.py, test_go_test.py, test_python.py, test_jupyter.py)."""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

TIMEOUT_S = 180  # a loaded host is slow, not wrong

TESTIFY = """package main

import (
    "testing"
    "github.com/stretchr/testify/assert"
)

func Add(a, b int) int { return a %s b }

func TestAdd(t *testing.T) {
    assert := assert.New(t)
    assert.Equal(5, Add(2, 3))
}
"""

JAVATUPLES = """import org.javatuples.Triplet;

public class Main {
    public static void main(String[] args) {
        Triplet<String, Integer, Double> t = Triplet.with("banana", 2, 0.99);
        System.out.println("Fruit: " + t.getValue0() + ", Price: " + t.getValue2());
    }
}
"""


def post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{url}{path}", json=body, timeout=TIMEOUT_S)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def run_code(url: str, language: str, code: str, **fields: Any) -> dict[str, Any]:
    return post(
        url,
        "/run_code",
        {"code": code, "language": language, "run_timeout": 30, "compile_timeout": 60, **fields},
    )


def test_typescript_runs_as_tsx_runs_it_with_the_node_libraries(service_url: str) -> None:
    programs = {
        "assert": 'import assert from "assert";\nassert.strictEqual(1, 2, "1 !== 2");\n',
        "lodash": 'import _ from "lodash";\nimport assert from "assert";\n'
        "const n: number = _.sum([2, 3]);\nassert(_.isEqual(n, 5));\nconsole.log('done');\n",
        "nodejs": 'const _ = require("lodash");\nconsole.log(_.chunk([1, 2, 3, 4], 2).length);\n',
        "untyped": "const n: number = 'not a number';\nconsole.log(n);\n",
    }
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {
            name: pool.submit(
                run_code, service_url, "nodejs" if name == "nodejs" else "typescript", code
            )
            for name, code in programs.items()
        }
        answers = {name: future.result() for name, future in futures.items()}

    failed = answers["assert"]
    assert failed["status"] == "Failed", failed
    assert failed["compile_result"] is None  # no compile step, as in SandboxFusion
    assert failed["run_result"]["status"] == "Finished"
    assert "AssertionError" in failed["run_result"]["stderr"]
    assert answers["lodash"]["status"] == "Success", answers["lodash"]
    assert answers["lodash"]["run_result"]["stdout"] == "done\n"
    assert answers["nodejs"]["run_result"]["stdout"] == "2\n", answers["nodejs"]
    # types are stripped, not checked: a type error runs
    assert answers["untyped"]["status"] == "Success", answers["untyped"]
    assert answers["untyped"]["run_result"]["stdout"] == "not a number\n"


def test_go_tests_find_testify_and_java_finds_javatuples_offline(service_url: str) -> None:
    with ThreadPoolExecutor(max_workers=3) as pool:
        passing = pool.submit(run_code, service_url, "go_test", TESTIFY % "+")
        failing = pool.submit(run_code, service_url, "go_test", TESTIFY % "-")
        java = pool.submit(run_code, service_url, "java", JAVATUPLES)
        ok, wrong, tuples = passing.result(), failing.result(), java.result()

    assert ok["status"] == "Success", ok
    assert "ok" in ok["run_result"]["stdout"] or "PASS" in ok["run_result"]["stdout"]
    assert wrong["status"] == "Failed", wrong
    assert wrong["compile_result"]["return_code"] == 0, wrong  # it built: the test failed
    assert "Not equal" in wrong["run_result"]["stdout"]
    assert tuples["status"] == "Success", tuples
    assert "Fruit: banana, Price: 0.99" in tuples["run_result"]["stdout"]


def test_fetch_files_come_back_and_mnt_is_the_episodes_own(service_url: str) -> None:
    code = (
        'import os\nopen("a.txt", "w").write("secret")\nopen("/mnt/b", "wb").write(b"\\xffsauce")\n'
        'os.symlink("/etc/hostname", "link")\nos.mkdir("dir")\n'
    )
    answer = run_code(
        service_url,
        "python",
        code,
        run_timeout=10,
        fetch_files=["a.txt", "/mnt/b", "missing.txt", "link", "dir", "/etc/passwd"],
    )
    assert answer["status"] == "Success", answer
    assert {path: base64.b64decode(data) for path, data in answer["files"].items()} == {
        "a.txt": b"secret",
        "/mnt/b": b"\xffsauce",
    }
    # the next episodes (a pooled sandbox's next uid, or a fresh sandbox) find /mnt empty
    for attempt in range(2):
        later = run_code(service_url, "python", f"import os\nprint(os.listdir('/mnt'), {attempt})")
        assert later["run_result"]["stdout"] == f"[] {attempt}\n", later


def test_a_judged_request_answers_its_cases_and_its_fetch_files(service_url: str) -> None:
    code = 'n = input()\nopen("/mnt/seen", "a").write(n)\nprint(n)\n'
    answer = run_code(
        service_url,
        "python",
        code,
        run_timeout=10,
        cases=[
            {"stdin": "1\n", "expected_stdout": "1\n"},
            {"stdin": "2\n", "expected_stdout": "3\n"},
        ],
        fetch_files=["/mnt/seen"],
    )
    assert (answer["accepted"], answer["score"]) == (1, 0.5), answer
    assert base64.b64decode(answer["files"]["/mnt/seen"]) == b"12"


def test_jupyter_cells_run_in_order_in_one_namespace(service_url: str) -> None:
    requests = {
        "print": {"cells": ["print(123)"]},
        "multi": {"cells": ['a = "hello"', "a", "print(a)"]},
        "raise": {
            "cells": [
                'a = "hello"',
                'import sys\nsys.stderr.write("This is an error message\\n")',
                "assert False",
                "print(a)",
            ]
        },
        "plot": {
            "cells": [
                "import matplotlib.pyplot as plt",
                "x = [1, 2, 3, 4, 5]\ny = [2, 3, 5, 7, 11]\nplt.plot(x, y)\n"
                "plt.title('Simple Plot')\nplt.show()\n",
            ]
        },
        "endless": {"cells": ["x = 1", "while True:\n    pass", "print(x)"], "cell_timeout": 1},
    }
    with ThreadPoolExecutor(max_workers=5) as pool:
        futures = {
            name: pool.submit(post, service_url, "/run_jupyter", {"total_timeout": 60, **body})
            for name, body in requests.items()
        }
        answers = {name: future.result() for name, future in futures.items()}

    for name, answer in answers.items():
        assert answer["status"] == "Success", (name, answer)
        assert answer["driver"]["status"] == "Finished"
    assert answers["print"]["cells"][0]["stdout"] == "123\n"
    multi = answers["multi"]["cells"]
    assert multi[0]["stdout"] == ""
    assert multi[1]["display"][0]["text/plain"] == "'hello'"
    assert multi[2]["stdout"] == "hello\n"
    raised = answers["raise"]["cells"]
    assert raised[0]["stdout"] == ""
    assert raised[1]["stderr"] == "This is an error message\n"
    assert raised[2]["error"][0]["ename"] == "AssertionError"
    assert raised[3]["stdout"] == "hello\n"
    plot = answers["plot"]["cells"][1]["display"][0]
    assert base64.b64decode(plot["image/png"]).startswith(b"\x89PNG")
    endless = answers["endless"]["cells"]
    assert endless[1]["error"][0]["ename"] == "CellTimeout"
    assert endless[2]["stdout"] == "1\n"


def test_jupyter_runs_out_of_its_total_time_as_sandboxfusion_reports_it(
    service_url: str,
) -> None:
    answer = post(
        service_url, "/run_jupyter", {"cells": ["import time\ntime.sleep(30)"], "total_timeout": 2}
    )
    assert answer["status"] == "Failed", answer
    assert answer["driver"]["status"] == "TimeLimitExceeded"
    assert answer["cells"] == []
