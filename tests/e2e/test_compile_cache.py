"""The compile cache end to end: identical code compiles once per host, a case's stdin does
not make it compile again, and what an episode does to its copy of the program stays in its
sandbox (a poisoned copy never reaches the next episode)."""

from __future__ import annotations

import time
from typing import Any

import httpx

# the compiler writes the second it ran into the program: two compiles a second apart
# print two stamps, a cached copy prints its compile's
STAMPED = (
    "#include <cstdio>\n#include <cstdlib>\n"
    'int main(){long a=0,b=0;if(scanf("%ld %ld",&a,&b)!=2)return 3;'
    'printf("%ld %s\\n",a+b,__DATE__ " " __TIME__);'
    "return 0;}\n"
)
# ... and then replaces its own program with a script: a cache that handed out the file it
# gave this episode (or read it back after the run) would serve that to the next one
POISONING = STAMPED.replace(
    "return 0;}",
    'fflush(stdout);remove("main");FILE*f=fopen("main","w");fputs("#!/bin/sh\\necho poisoned\\n",f);'
    'fclose(f);system("chmod 755 main; ./main");return 0;}',
)


def run_code(url: str, code: str, stdin: str, **fields: Any) -> dict[str, Any]:
    body = {"code": code, "language": "cpp", "stdin": stdin, "compile_timeout": 30, **fields}
    answer: dict[str, Any] = httpx.post(f"{url}/run_code", json=body, timeout=180).json()
    assert answer["status"] == "Success", answer
    return answer


def stamp(answer: dict[str, Any]) -> tuple[str, str]:
    total, _, when = answer["run_result"]["stdout"].splitlines()[0].partition(" ")
    return total, when


def test_identical_code_compiles_once_and_each_case_reuses_it(service_url: str) -> None:
    code = STAMPED + f"// {time.time_ns()}\n"  # new to this host's cache
    first = run_code(service_url, code, "1 2\n")
    time.sleep(1.1)  # a second compile would stamp another second
    again = run_code(service_url, code, "40 2\n")  # another case: another stdin
    assert stamp(first)[0] == "3" and stamp(again)[0] == "42"
    assert stamp(again)[1] == stamp(first)[1]  # the first compile's program
    # other code compiles on its own
    time.sleep(1.1)
    other = run_code(service_url, code + "// another\n", "1 2\n")
    assert stamp(other)[1] != stamp(first)[1]


def test_a_program_that_replaces_itself_does_not_poison_the_next_episode(
    service_url: str,
) -> None:
    code = POISONING + f"// {time.time_ns()}\n"
    first = run_code(service_url, code, "1 2\n")
    assert first["run_result"]["stdout"].splitlines()[-1] == "poisoned"  # its own copy only
    time.sleep(1.1)
    second = run_code(service_url, code, "1 2\n")
    lines = second["run_result"]["stdout"].splitlines()
    assert stamp(second) == stamp(first) and lines[-1] == "poisoned"
    assert len(lines) == 2  # the cached program ran (and poisoned its own copy again)


def test_a_shorter_compile_timeout_than_the_cached_compile_took_compiles_again(
    service_url: str,
) -> None:
    # a compile that takes a while: the cached program is not an excuse to skip the limit
    heavy = (
        STAMPED
        + "".join(
            f"template<int N> struct F{i}{{ static const long v = F{i}<N-1>::v + N; }};\n"
            f"template<> struct F{i}<0>{{ static const long v = 0; }};\n"
            f"long g{i}(){{ return F{i}<800>::v; }}\n"
            for i in range(40)
        )
        + f"// {time.time_ns()}\n"
    )
    run_code(service_url, heavy, "1 2\n", compile_timeout=60)
    answer = httpx.post(
        f"{service_url}/run_code",
        json={"code": heavy, "language": "cpp", "stdin": "1 2\n", "compile_timeout": 0.05},
        timeout=180,
    ).json()
    assert answer["compile_result"]["status"] == "TimeLimitExceeded", answer


# a program that takes memory until it is stopped: on a cache hit, the program itself comes
# in the request, and the sandbox's server must not be what the kernel stops for it
GREEDY = (
    "#include <cstdio>\n#include <cstdlib>\n#include <cstring>\n"
    "int main(){for(;;){char*p=(char*)malloc(16<<20);if(!p)return 7;memset(p,1,16<<20);}}\n"
)


def test_a_cached_program_that_exhausts_memory_is_the_codes_failure(service_url: str) -> None:
    code = GREEDY + f"// {time.time_ns()}\n"
    for _ in range(2):  # a compile, then a cache hit
        body = {"code": code, "language": "cpp", "compile_timeout": 30, "memory_limit_MB": 256}
        answer = httpx.post(f"{service_url}/run_code", json=body, timeout=180).json()
        assert answer["status"] == "Failed", answer  # the code's failure, not SandboxError
        assert answer["compile_result"]["status"] == "Finished", answer
        assert answer["run_result"]["status"] == "MemoryLimitExceeded", answer
