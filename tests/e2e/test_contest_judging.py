"""Code-contest judging (format `cases`, `proctor.judging`) over HTTP, real Redis and Docker.

One request carries many stdin cases: the program compiles once and runs per case; each
case gets its verdict and time; the reward is the fraction accepted under `scoring:
partial`. Checkers, float tolerance, memory, stack and output limits, through the native
API and SandboxFusion's `/run_code`.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from core import languages
from tests.e2e.helpers import run

pytestmark = [pytest.mark.docker, pytest.mark.redis]

SUM_CPP = '#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a+b<<"\\n";}\n'
SUM_PY = "a, b = map(int, input().split())\nprint(a + b)\n"
# wrong when a > 5
HALF_WRONG_CPP = (
    '#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<(a>5?a-b:a+b)<<"\\n";}\n'
)
SUM_CASES = [{"stdin": f"{i} {i * 2}\n", "expected_stdout": f"{i * 3}\n"} for i in range(10)]


def judged(
    language: str,
    code: str,
    cases: list[dict[str, str]],
    *,
    scoring: str = "partial",
    limits: dict[str, Any] | None = None,
    isolation: str | None = None,
    **judge: Any,
) -> dict[str, Any]:
    lang = languages.language(language)
    return {
        "task": {
            "image": lang.image,
            "language": language,
            "tests": {"format": "cases", "judge": {"cases": cases, **judge}},
            "limits": {"timeout_s": 5, **(limits or {})},
            "scoring": scoring,
            **({"isolation": isolation} if isolation else {}),
        },
        "solution": {"files": {lang.source: code}},
    }


def verdicts(result: dict[str, Any]) -> list[str]:
    return [case["verdict"] for case in result["tests"]]


def test_many_cases_one_compile_all_pass(http: httpx.Client) -> None:
    result = run(http, judged("cpp", SUM_CPP, SUM_CASES))
    assert result["verdict"] == "passed", result
    assert result["reward"] == 1.0
    assert verdicts(result) == ["accepted"] * 10
    assert [c["name"] for c in result["tests"]] == [f"case {i}" for i in range(1, 11)]
    assert all(c["duration_s"] > 0 for c in result["tests"])
    assert result["timings"]["compile_s"] > 0  # compiled once, in its own step


def test_some_cases_fail_partial_reward_or_nothing(http: httpx.Client) -> None:
    partial = run(http, judged("cpp", HALF_WRONG_CPP, SUM_CASES))
    assert partial["verdict"] == "failed"
    assert verdicts(partial) == ["accepted"] * 6 + ["wrong_answer"] * 4
    assert partial["reward"] == pytest.approx(0.6)
    assert "expected '18', got '-6'" in partial["tests"][6]["message"]
    binary = run(http, judged("cpp", HALF_WRONG_CPP, SUM_CASES, scoring="binary"))
    assert binary["reward"] == 0.0
    assert verdicts(binary) == verdicts(partial)


def test_python_cases(http: httpx.Client) -> None:
    result = run(http, judged("python", SUM_PY, SUM_CASES[:5]))
    assert result["verdict"] == "passed", result
    assert verdicts(result) == ["accepted"] * 5


# any two numbers that sum to the input: many right answers, which no comparison accepts
SPLIT_CPP = "#include <iostream>\nint main(){long n;std::cin>>n;std::cout<<n-1<<' '<<1<<\"\\n\";}\n"
SPLIT_WRONG_CPP = (
    "#include <iostream>\nint main(){long n;std::cin>>n;std::cout<<n<<' '<<1<<\"\\n\";}\n"
)
SPLIT_CASES = [{"stdin": f"{n}\n", "expected_stdout": f"{n // 2} {n - n // 2}\n"} for n in (4, 9)]
TESTLIB_CHECKER = r"""#include "testlib.h"
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    long n = inf.readLong();
    long a = ouf.readLong(), b = ouf.readLong();
    ans.readLong();
    if (a + b != n) quitf(_wa, "%ld + %ld is not %ld", a, b, n);
    quitf(_ok, "%ld = %ld + %ld", n, a, b);
}
"""
PYTHON_CHECKER = """import sys
n = int(open(sys.argv[1]).read())
a, b = map(int, open(sys.argv[2]).read().split())
open(sys.argv[3]).read()
if a + b != n:
    print(f"{a} + {b} is not {n}", file=sys.stderr)
    sys.exit(1)
"""


@pytest.mark.parametrize(
    ("language", "source"), [("cpp", TESTLIB_CHECKER), ("python", PYTHON_CHECKER)]
)
def test_a_checker_accepts_other_answers_and_rejects_wrong_ones(
    http: httpx.Client, language: str, source: str
) -> None:
    checker = {"language": language, "source": source}
    right = run(http, judged("cpp", SPLIT_CPP, SPLIT_CASES, checker=checker))
    assert right["verdict"] == "passed", right
    assert verdicts(right) == ["accepted", "accepted"]
    wrong = run(http, judged("cpp", SPLIT_WRONG_CPP, SPLIT_CASES, checker=checker))
    assert wrong["verdict"] == "failed"
    assert verdicts(wrong) == ["wrong_answer", "wrong_answer"]
    assert "is not 4" in wrong["tests"][0]["message"]


def test_a_checker_that_does_not_compile_is_the_tasks_failure(http: httpx.Client) -> None:
    checker = {"language": "cpp", "source": "int main( {"}
    result = run(http, judged("cpp", SPLIT_CPP, SPLIT_CASES, checker=checker))
    assert result["verdict"] == "infra_error"
    assert result["reward"] is None
    assert "checker does not compile" in result["error"]


@pytest.mark.parametrize("isolation", ["pooled", "container"])
def test_the_program_cannot_read_the_checker_or_the_answers(
    http: httpx.Client, isolation: str
) -> None:
    """While a case runs, nothing of the expected outputs or the checker is on any disk the
    program can read, nor in any process it can read."""
    spy = (
        "import glob, os\n"
        "needle = 'SECRET' + '-ANSWER'\n"
        "found = []\n"
        "for pattern in ('/tmp/**', '/workspace/**', '/dev/shm/**', '/home/**'):\n"
        "    for path in glob.glob(pattern, recursive=True):\n"
        "        try:\n"
        "            if needle in open(path, errors='ignore').read():\n"
        "                found.append(path)\n"
        "        except OSError:\n"
        "            pass\n"
        "for pid in os.listdir('/proc'):\n"
        "    for part in ('environ', 'cmdline', 'mem'):\n"
        "        try:\n"
        "            if needle.encode() in open(f'/proc/{pid}/{part}', 'rb').read(1 << 20):\n"
        "                found.append(f'/proc/{pid}/{part}')\n"
        "        except (OSError, ValueError):\n"
        "            pass\n"
        "print('found', found)\n"
    )
    cases = [{"stdin": "", "expected_stdout": "SECRET-ANSWER\n"}]
    checker = {
        "language": "python",  # says what the program printed
        "source": "# SECRET-ANSWER\nimport sys\nsys.stderr.write(open(sys.argv[2]).read())\n"
        "sys.exit(1)\n",
    }
    for extra in ({}, {"checker": checker}):
        body = judged("python", spy, cases, comparison="exact", isolation=isolation, **extra)
        result = run(http, body)
        assert result["tests"][0]["verdict"] == "wrong_answer", result
        assert "found []" in result["tests"][0]["message"], result


FLOAT_CASES = [{"stdin": "1 3\n", "expected_stdout": "0.333333333\n"}]


def test_float_tolerance(http: httpx.Client) -> None:
    close = "a, b = map(int, input().split())\nprint(f'{a / b:.7f}')\n"
    far = "a, b = map(int, input().split())\nprint(f'{a / b:.3f}')\n"
    assert run(http, judged("python", close, FLOAT_CASES, comparison="float"))["passed"]
    assert not run(http, judged("python", close, FLOAT_CASES, comparison="exact"))["passed"]
    loose = judged("python", far, FLOAT_CASES, comparison="float", abs_tolerance=1e-3)
    assert run(http, loose)["passed"]
    assert not run(http, judged("python", far, FLOAT_CASES, comparison="float"))["passed"]


HOG = {
    "cpp": "#include <vector>\n#include <cstdio>\nint main(){std::vector<char*> v;"
    "for(;;){char* p=new char[1<<20];for(int i=0;i<(1<<20);i+=4096)p[i]=1;v.push_back(p);}}\n",
    "c": "#include <stdlib.h>\nint main(void){for(;;){char* p=malloc(1<<20);if(!p)return 1;"
    "for(int i=0;i<(1<<20);i+=4096)p[i]=1;}}\n",
    "python": "x = []\nwhile True:\n    x.append(bytearray(1 << 20))\n",
    "java": "import java.util.*;\npublic class Main { public static void main(String[] a) {"
    " List<long[]> v = new ArrayList<>(); for (;;) v.add(new long[1 << 17]); } }\n",
    "go": "package main\nfunc main(){v:=[][]byte{};for{b:=make([]byte,1<<20);"
    "for i:=range b{b[i]=1};v=append(v,b)}}\n",
    "rust": "fn main(){let mut v:Vec<Vec<u8>>=Vec::new();loop{v.push(vec![1u8;1<<20]);}}\n",
}
RUNTIME_ERROR = {
    "cpp": "int main(){return 3;}\n",
    "c": "int main(void){return 3;}\n",
    "python": "raise SystemExit(3)\n",
    "java": "public class Main { public static void main(String[] a) { System.exit(3); } }\n",
    "go": 'package main\nimport "os"\nfunc main(){os.Exit(3)}\n',
    "rust": "fn main(){std::process::exit(3);}\n",
}


@pytest.mark.parametrize("language", sorted(HOG))
def test_memory_limit_is_its_own_verdict(http: httpx.Client, language: str) -> None:
    cases = [{"stdin": "", "expected_stdout": ""}]
    limits = {"memory_mb": 128}
    hog = run(http, judged(language, HOG[language], cases, limits=limits))
    assert hog["verdict"] == "oom", hog
    assert verdicts(hog) == ["memory_limit"]
    crash = run(http, judged(language, RUNTIME_ERROR[language], cases, limits=limits))
    assert crash["verdict"] == "runtime_error", crash
    assert verdicts(crash) == ["runtime_error"]


def test_python_memory_error_is_memory_limit(http: httpx.Client) -> None:
    code = "x = bytearray(1 << 46)\n"  # refused at once: MemoryError, no kill
    result = run(http, judged("python", code, [{"stdin": "", "expected_stdout": ""}]))
    assert verdicts(result) == ["memory_limit"], result


DEEP_CPP = (
    "#include <iostream>\n__attribute__((noinline)) long depth(long n){volatile char pad[256];"
    "pad[n&255]=1;if(n==0)return 0;long r=depth(n-1);return r+pad[n&255];}\n"
    'int main(){long n;std::cin>>n;std::cout<<depth(n)<<"\\n";}\n'
)


def test_stack_size_is_settable(http: httpx.Client) -> None:
    deep = [{"stdin": "1000000\n", "expected_stdout": "1000000\n"}]  # ~300 MB of stack
    limits = {"memory_mb": 512}
    roomy = run(http, judged("cpp", DEEP_CPP, deep, limits=limits, stack_mb=400))
    assert verdicts(roomy) == ["accepted"], roomy
    tight = run(http, judged("cpp", DEEP_CPP, deep, limits=limits, stack_mb=8))
    assert verdicts(tight) == ["runtime_error"], tight  # SIGSEGV at 8 MB


def test_online_judge_is_defined_for_c_and_cpp(http: httpx.Client) -> None:
    code = (
        '#include <cstdio>\nint main(){\n#ifdef ONLINE_JUDGE\nputs("judge");\n#else\n'
        'puts("local");\n#endif\n}\n'
    )
    result = run(http, judged("cpp", code, [{"stdin": "", "expected_stdout": "judge\n"}]))
    assert result["passed"], result


def test_output_limit_ends_the_case(http: httpx.Client) -> None:
    code = "while True:\n    print('y' * 1000)\n"
    cases = [{"stdin": "", "expected_stdout": "y\n"}, {"stdin": "", "expected_stdout": "y\n"}]
    result = run(http, judged("python", code, cases, limits={"output_bytes": 65536}))
    assert result["verdict"] == "output_limit", result
    assert verdicts(result) == ["output_limit", "output_limit"]
    assert all(c["duration_s"] < 4 for c in result["tests"])  # killed, not timed out


def test_time_limit_per_case(http: httpx.Client) -> None:
    code = "import time\nn = int(input())\ntime.sleep(n)\nprint(n)\n"
    cases = [
        {"stdin": "0\n", "expected_stdout": "0\n"},
        {"stdin": "30\n", "expected_stdout": "30\n"},
    ]
    result = run(http, judged("python", code, cases, limits={"timeout_s": 1}))
    assert verdicts(result) == ["accepted", "time_limit"], result
    assert result["verdict"] == "timeout"
    assert result["reward"] == pytest.approx(0.5)


def run_code(http: httpx.Client, **body: Any) -> dict[str, Any]:
    response = http.post("/run_code", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_run_code_with_cases(http: httpx.Client) -> None:
    """SandboxFusion's request with Proctor's `cases`: verdicts, count and fraction back."""
    answer = run_code(http, language="cpp", code=HALF_WRONG_CPP, cases=SUM_CASES, run_timeout=5)
    assert answer["status"] == "Failed", answer
    assert answer["compile_result"]["status"] == "Finished"
    assert [c["verdict"] for c in answer["cases"]] == ["accepted"] * 6 + ["wrong_answer"] * 4
    assert answer["accepted"] == 6
    assert answer["score"] == pytest.approx(0.6)
    right = run_code(http, language="python", code=SUM_PY, cases=SUM_CASES[:3])
    assert right["status"] == "Success", right
    assert right["score"] == 1.0


def test_run_code_with_a_checker_and_a_memory_limit(http: httpx.Client) -> None:
    checker = {"language": "cpp", "source": TESTLIB_CHECKER}
    python_split = "n = int(input())\nprint(n - 2, 2)\n"
    answer = run_code(
        http, language="python", code=python_split, cases=SPLIT_CASES, checker=checker
    )
    assert answer["status"] == "Success", answer
    cases = [{"stdin": "", "expected_stdout": ""}]
    hog = run_code(http, language="cpp", code=HOG["cpp"], cases=cases, memory_limit_MB=128)
    assert hog["run_result"]["status"] == "MemoryLimitExceeded", hog
    assert hog["cases"][0]["verdict"] == "memory_limit"
    single = run_code(http, language="cpp", code=HOG["cpp"], memory_limit_MB=128)
    assert single["run_result"]["status"] == "MemoryLimitExceeded", single


def test_a_fresh_container_judges_alike(http: httpx.Client) -> None:
    """The runner as the sandbox user (`isolation: container`), not a root server."""
    container = {"isolation": "container"}
    partial = run(http, judged("cpp", HALF_WRONG_CPP, SUM_CASES, **container))
    assert verdicts(partial) == ["accepted"] * 6 + ["wrong_answer"] * 4, partial
    cases = [{"stdin": "", "expected_stdout": ""}]
    hog = run(http, judged("cpp", HOG["cpp"], cases, limits={"memory_mb": 128}, **container))
    assert verdicts(hog) == ["memory_limit"], hog
    checker = {"language": "cpp", "source": TESTLIB_CHECKER}
    checked = run(http, judged("cpp", SPLIT_CPP, SPLIT_CASES, checker=checker, **container))
    assert verdicts(checked) == ["accepted", "accepted"], checked
