"""Every language of `core.languages` over HTTP, against real Redis and Docker.

Each language runs the same five programs through SandboxFusion's `/run_code`: a correct
stdin/stdout program, a wrong answer, one that does not compile (for interpreted languages:
a syntax error, which SandboxFusion reports as a failed run), a runtime error, and an
endless loop. The answers are read as verl reads them (`VerlClient` in
test_sandboxfusion_compat.py); the native API is checked for the `compile_error` verdict
and the compile time in `timings`.
"""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import run

# language → (correct program: reads two integers, prints their sum; wrong answer; does
# not compile; fails at run time; never ends)
PROGRAMS: dict[str, tuple[str, str, str, str, str]] = {
    "python": (
        "a, b = map(int, input().split())\nprint(a + b)\n",
        "a, b = map(int, input().split())\nprint(a - b)\n",
        "def f(:\n",
        "raise SystemExit(3)\n",
        "while True:\n    pass\n",
    ),
    "bash": (
        "read a b\necho $((a + b))\n",
        "read a b\necho $((a * b))\n",
        "if then fi (\n",
        "exit 3\n",
        "while :; do :; done\n",
    ),
    "cpp": (
        "#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a+b<<std::endl;}\n",
        "#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a-b<<std::endl;}\n",
        "int main() { return undefined_name; }\n",
        "#include <vector>\nint main(){std::vector<int> v;return v.at(3);}\n",
        "int main(){volatile int x=0;for(;;){x++;}}\n",
    ),
    "c": (
        '#include <stdio.h>\nint main(void){long a,b;scanf("%ld %ld",&a,&b);'
        'printf("%ld\\n",a+b);return 0;}\n',
        '#include <stdio.h>\nint main(void){long a,b;scanf("%ld %ld",&a,&b);'
        'printf("%ld\\n",a*b);return 0;}\n',
        "int main(void) { return missing; }\n",
        "#include <stdlib.h>\nint main(void){abort();}\n",
        "int main(void){volatile int x=0;for(;;){x++;}}\n",
    ),
    "java": (
        "import java.util.*;\npublic class Main { public static void main(String[] a) {"
        " Scanner s = new Scanner(System.in); System.out.println(s.nextLong() + s.nextLong()); } }\n",
        "import java.util.*;\npublic class Main { public static void main(String[] a) {"
        " Scanner s = new Scanner(System.in); System.out.println(s.nextLong() - s.nextLong()); } }\n",
        "public class Main { public static void main(String[] a) { int x = ; } }\n",
        "public class Main { public static void main(String[] a) { assert 1 > 2; } }\n",
        "public class Main { public static void main(String[] a) { while (true) {} } }\n",
    ),
    "go": (
        'package main\nimport "fmt"\nfunc main(){var a,b int;fmt.Scan(&a,&b);fmt.Println(a+b)}\n',
        'package main\nimport "fmt"\nfunc main(){var a,b int;fmt.Scan(&a,&b);fmt.Println(a*b)}\n',
        "package main\nfunc main() { x := }\n",
        'package main\nfunc main(){var m map[string]int;m["a"]=1}\n',
        "package main\nfunc main(){for{}}\n",
    ),
    "nodejs": (
        'const [a,b]=require("fs").readFileSync(0,"utf8").trim().split(/\\s+/).map(Number);'
        "console.log(a+b);\n",
        'const [a,b]=require("fs").readFileSync(0,"utf8").trim().split(/\\s+/).map(Number);'
        "console.log(a*b);\n",
        "function ( {\n",
        "null.x;\n",
        "for(;;){}\n",
    ),
    "typescript": (
        'const [a, b]: number[] = require("fs").readFileSync(0, "utf8").trim().split(/\\s+/)'
        ".map(Number);\nconsole.log(a + b);\n",
        'const [a, b]: number[] = require("fs").readFileSync(0, "utf8").trim().split(/\\s+/)'
        ".map(Number);\nconsole.log(a * b);\n",
        "let x: number = ;\n",
        "throw new Error('boom');\n",
        "for (;;) {}\n",
    ),
    "rust": (
        "use std::io::Read;\nfn main(){let mut s=String::new();"
        "std::io::stdin().read_to_string(&mut s).unwrap();"
        "let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();"
        'println!("{}",v[0]+v[1]);}\n',
        "use std::io::Read;\nfn main(){let mut s=String::new();"
        "std::io::stdin().read_to_string(&mut s).unwrap();"
        "let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();"
        'println!("{}",v[0]*v[1]);}\n',
        'fn main() { let x: i32 = "no"; }\n',
        'fn main(){let v: Vec<i32> = Vec::new(); println!("{}", v[3]);}\n',
        'fn main(){let mut x:u64=1;loop{x=x.wrapping_mul(3);if x==0{println!("{}",x);}}}\n',
    ),
}
# a syntax error is a failed run, as in SandboxFusion (TypeScript: tsx, no compile step)
INTERPRETED = {"python", "bash", "nodejs", "typescript"}
SLOW_COMPILERS = {"java": 40, "rust": 40, "go": 40}


def run_code(url: str, language: str, code: str, **fields: Any) -> dict[str, Any]:
    body = {
        "code": code,
        "language": language,
        "stdin": "2 3\n",
        "compile_timeout": SLOW_COMPILERS.get(language, 20),
        "run_timeout": 10,  # generous: a loaded host is slow, not wrong
        "memory_limit_MB": 1024,
        **fields,
    }
    response = httpx.post(f"{url}/run_code", json=body, timeout=120)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.mark.parametrize("language", sorted(PROGRAMS))
def test_each_language_like_sandboxfusion(service_url: str, language: str) -> None:
    correct, wrong, broken, crashing, endless = PROGRAMS[language]
    with ThreadPoolExecutor(max_workers=5) as pool:
        futures = [
            pool.submit(run_code, service_url, language, code)
            for code in (correct, wrong, broken, crashing)
        ]
        futures.append(pool.submit(run_code, service_url, language, endless, run_timeout=1))
        ok, wa, ce, re, tle = (f.result() for f in futures)
    compiled = language not in INTERPRETED

    assert ok["status"] == "Success", ok
    assert ok["run_result"]["stdout"].strip() == "5"
    assert ok["run_result"]["return_code"] == 0
    if compiled:
        assert ok["compile_result"]["status"] == "Finished"
        assert ok["compile_result"]["return_code"] == 0
        assert ok["compile_result"]["execution_time"] > 0
    else:
        assert ok["compile_result"] is None

    assert wa["status"] == "Success" and wa["run_result"]["stdout"].strip() in ("-1", "6"), wa

    assert ce["status"] == "Failed", ce
    if compiled:
        assert ce["compile_result"]["status"] == "Finished"
        assert ce["compile_result"]["return_code"] != 0
        assert ce["compile_result"]["stdout"] + ce["compile_result"]["stderr"], ce
        assert ce["run_result"] is None
    else:
        assert ce["run_result"]["status"] == "Finished"
        assert ce["run_result"]["return_code"] != 0

    assert re["status"] == "Failed", re
    assert re["run_result"]["status"] == "Finished"
    assert re["run_result"]["return_code"] != 0

    assert tle["status"] == "Failed", tle
    assert tle["run_result"]["status"] == "TimeLimitExceeded", tle
    assert tle["run_result"]["return_code"] is None


def test_an_unknown_language_is_refused_like_sandboxfusion(service_url: str) -> None:
    response = httpx.post(f"{service_url}/run_code", json={"code": "x", "language": "cobol"})
    assert response.status_code == 422
    assert "cobol" in response.text and "cpp" in response.text


def test_a_compiler_that_eats_memory_or_time_is_limited(service_url: str) -> None:
    # the preprocessor reads an endless file: the compile step's limits stop it
    answer = run_code(
        service_url,
        "cpp",
        '#include "/dev/zero"\nint main(){}\n',
        compile_timeout=2,
        memory_limit_MB=256,
    )
    assert answer["status"] == "Failed", answer
    compiled = answer["compile_result"]
    assert compiled["status"] == "TimeLimitExceeded" or compiled["return_code"] != 0
    assert answer["run_result"] is None


def test_files_text_and_binary_reach_the_program(service_url: str) -> None:
    code = (
        '#include <cstdio>\nint main(){FILE*f=fopen("blob.bin","rb");int c,n=0,s=0;'
        'while((c=fgetc(f))!=EOF){n++;s+=c;}FILE*g=fopen("data/n.txt","r");int k;'
        'fscanf(g,"%d",&k);printf("%d %d %d\\n",n,s,k);}\n'
    )
    files = {
        "blob.bin": base64.b64encode(bytes([0, 255, 254, 1])).decode(),
        "data/n.txt": base64.b64encode(b"42\n").decode(),
    }
    answer = run_code(service_url, "cpp", code, files=files)
    assert answer["status"] == "Success", answer
    assert answer["run_result"]["stdout"].split() == ["4", "510", "42"]


def test_unit_test_modes(service_url: str) -> None:
    go_test = 'package main\nimport "testing"\nfunc TestAdd(t *testing.T){if 2+3 != 5 {t.Fatal("math")}}\n'
    junit = (
        "import org.junit.jupiter.api.Test;\nimport static org.junit.jupiter.api.Assertions.*;\n"
        "public class AddTest { @Test void adds() { assertEquals(%d, 2 + 3); } }\n"
    )
    with ThreadPoolExecutor(max_workers=4) as pool:
        go_ok = pool.submit(run_code, service_url, "go_test", go_test)
        go_bad = pool.submit(run_code, service_url, "go_test", go_test.replace("!= 5", "!= 6"))
        junit_ok = pool.submit(run_code, service_url, "junit", junit % 5)
        junit_bad = pool.submit(run_code, service_url, "junit", junit % 6)
    assert go_ok.result()["status"] == "Success", go_ok.result()
    assert go_bad.result()["status"] == "Failed"
    assert go_bad.result()["run_result"]["return_code"] != 0
    assert junit_ok.result()["status"] == "Success", junit_ok.result()
    assert junit_bad.result()["status"] == "Failed"


def test_the_native_api_gives_compile_errors_their_verdict(http: httpx.Client) -> None:
    def body(code: str) -> dict[str, Any]:
        return {
            "task": {
                "image": "cpp",
                "language": "cpp",
                "tests": {"format": "exit_code", "command": "./main | grep -qx 5"},
                "limits": {"timeout_s": 5, "compile_timeout_s": 20},
            },
            "solution": {"files": {"main.cpp": code}},
        }

    good = run(http, body(PROGRAMS["cpp"][0].replace("std::cin>>a>>b;", "a=2;b=3;")))
    assert (good["verdict"], good["reward"]) == ("passed", 1.0), good
    assert good["timings"]["compile_s"] > 0
    bad = run(http, body(PROGRAMS["cpp"][2]))
    assert (bad["verdict"], bad["reward"]) == ("compile_error", 0.0), bad
    assert "undefined_name" in bad["stderr"]
    assert bad["timings"]["compile_s"] > 0
