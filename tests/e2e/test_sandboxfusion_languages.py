"""SandboxFusion's other languages (csharp, kotlin_script, scala, ruby, php, perl, lua, sql,
verilog, R, racket, D_ut, jest) over HTTP, against real Redis and Docker.

Each runs six programs through `/run_code`, read as test_languages.py reads them: a correct
stdin/stdout program (for jest, a passing test that reads stdin), a wrong answer, one that does
not compile (a failed compile where SandboxFusion compiles, else a failed run), a runtime
error, an endless loop, and one that allocates past `memory_limit_MB` after printing `start`
(so the failure is the limit's, not a program that never ran). SandboxFusion's languages that
cannot run here answer its SandboxError; the native API gives a compile error its verdict.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import run
from tests.e2e.test_languages import run_code

# language → (correct: reads two integers, prints their sum; wrong answer; does not compile;
# fails at run time; never ends; prints `start`, then eats memory)
PROGRAMS: dict[str, tuple[str, str, str, str, str, str]] = {
    "csharp": (
        # no `using`: .NET's implicit usings, which SandboxFusion's `dotnet run` has
        "public class Program { public static void Main() {"
        " var p = Console.ReadLine().Split(' ').Select(long.Parse).ToArray();"
        " Console.WriteLine(p[0] + p[1]); } }\n",
        "public class Program { public static void Main() {"
        " var p = Console.ReadLine().Split(' ').Select(long.Parse).ToArray();"
        " Console.WriteLine(p[0] * p[1]); } }\n",
        "public class Program { public static void Main() { int x = ; } }\n",
        'public class Program { public static void Main() { throw new Exception("boom"); } }\n',
        "public class Program { public static void Main() { while (true) {} } }\n",
        'public class Program { public static void Main() { Console.WriteLine("start");'
        " var l = new List<byte[]>(); while (true) { var b = new byte[1 << 20];"
        " for (int i = 0; i < b.Length; i += 4096) b[i] = 1; l.Add(b); } } }\n",
    ),
    "kotlin_script": (
        'val (a, b) = readLine()!!.trim().split(" ").map { it.toLong() }\nprintln(a + b)\n',
        'val (a, b) = readLine()!!.trim().split(" ").map { it.toLong() }\nprintln(a * b)\n',
        "val x: Int = \n",
        'throw Exception("boom")\n',
        "while (true) {}\n",
        'println("start")\nval l = ArrayList<LongArray>()\nwhile (true) l.add(LongArray(1 shl 20))\n',
    ),
    "scala": (
        "object Main { def main(args: Array[String]): Unit = {"
        ' val Array(a, b) = scala.io.StdIn.readLine().trim.split(" ").map(_.toLong);'
        " println(a + b) } }\n",
        "object Main { def main(args: Array[String]): Unit = {"
        ' val Array(a, b) = scala.io.StdIn.readLine().trim.split(" ").map(_.toLong);'
        " println(a * b) } }\n",
        'object Main { def main(args: Array[String]): Unit = { val x: Int = "no" } }\n',
        "object Solution { def main(args: Array[String]): Unit = {"
        ' throw new RuntimeException("boom") } }\n',
        "object Main { def main(args: Array[String]): Unit = { while (true) {} } }\n",
        'object Main { def main(args: Array[String]): Unit = { println("start");'
        " val l = scala.collection.mutable.ArrayBuffer[Array[Long]]();"
        " while (true) l += new Array[Long](1 << 20) } }\n",
    ),
    "ruby": (
        "a, b = gets.split.map(&:to_i)\nputs a + b\n",
        "a, b = gets.split.map(&:to_i)\nputs a * b\n",
        "def f(\n",
        'raise "boom"\n',
        "loop {}\n",
        '$stdout.sync = true\nputs "start"\na = []\nloop { a << "x" * (1 << 20) }\n',
    ),
    "php": (
        'fscanf(STDIN, "%d %d", $a, $b);\necho $a + $b, "\\n";\n',
        '<?php\nfscanf(STDIN, "%d %d", $a, $b);\necho $a * $b, "\\n";\n',
        "<?php function ( {\n",
        'throw new Exception("boom");\n',
        "while (true) {}\n",
        'echo "start\\n";\n$a = [];\nwhile (true) { $a[] = str_repeat("x", 1 << 20); }\n',
    ),
    "perl": (
        "my ($a, $b) = split ' ', <STDIN>;\nprint $a + $b, \"\\n\";\n",
        "my ($a, $b) = split ' ', <STDIN>;\nprint $a * $b, \"\\n\";\n",
        "sub {\n",
        'die "boom";\n',
        "1 while 1;\n",
        '$| = 1;\nprint "start\\n";\nmy @a;\npush @a, "x" x (1 << 20) while 1;\n',
    ),
    "lua": (
        'local a, b = io.read("n", "n")\nprint(math.tointeger(a + b))\n',
        'local a, b = io.read("n", "n")\nprint(math.tointeger(a * b))\n',
        "function (\n",
        'error("boom")\n',
        "while true do end\n",
        'print("start")\nio.stdout:flush()\nlocal t = {}\n'
        'while true do t[#t + 1] = string.rep("x", 1 << 20) .. #t end\n',
    ),
    "sql": (
        "CREATE TABLE t(a INT, b INT);\n.separator ' '\n.import /dev/stdin t\n"
        "SELECT a + b FROM t;\n",
        "CREATE TABLE t(a INT, b INT);\n.separator ' '\n.import /dev/stdin t\n"
        "SELECT a * b FROM t;\n",
        "SELEC a FROM;\n",
        "SELECT abs(-9223372036854775807 - 1);\n",  # integer overflow, raised at run time
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c;\n",
        "SELECT 'start';\nCREATE TABLE t AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL"
        " SELECT x + 1 FROM c LIMIT 10000000) SELECT x, randomblob(1000) AS b FROM c;\n",
    ),
    "verilog": (
        "module tb; integer a, b, n; initial begin"
        ' n = $fscanf(32\'h8000_0000, "%d %d", a, b); $display("%0d", a + b); $finish;'
        " end endmodule\n",
        "module tb; integer a, b, n; initial begin"
        ' n = $fscanf(32\'h8000_0000, "%d %d", a, b); $display("%0d", a * b); $finish;'
        " end endmodule\n",
        "module tb; initial begin x = ; end endmodule\n",
        'module tb; initial $fatal(1, "boom"); endmodule\n',
        "module tb; reg clk = 0; always #1 clk = ~clk; endmodule\n",
        'module tb; longint d[]; initial begin $display("start"); $fflush();'
        ' d = new[1 << 28]; $display("%0d", d.size()); $finish; end endmodule\n',
    ),
    "R": (
        'x <- scan(file("stdin"), quiet = TRUE)\ncat(x[1] + x[2], "\\n")\n',
        'x <- scan(file("stdin"), quiet = TRUE)\ncat(x[1] * x[2], "\\n")\n',
        "f <- function( {\n",
        'stop("boom")\n',
        "repeat {}\n",
        'cat("start\\n")\nflush(stdout())\nx <- list()\ni <- 0\n'
        "repeat { i <- i + 1; x[[i]] <- rep(i, 1e6) }\n",
    ),
    "racket": (
        "#lang racket\n(displayln (+ (read) (read)))\n",
        "#lang racket\n(displayln (* (read) (read)))\n",
        "#lang racket\n(displayln (+ 1 2)\n",
        '#lang racket\n(error \'boom "bad")\n',
        "#lang racket\n(let loop () (loop))\n",
        '#lang racket\n(displayln "start")\n(flush-output)\n'
        "(let loop ([l '()]) (loop (cons (make-bytes 1000000 1) l)))\n",
    ),
    "D_ut": (
        'import std.stdio;\nvoid main(){long a,b;readf(" %d %d",&a,&b);writeln(a+b);}\n',
        'import std.stdio;\nvoid main(){long a,b;readf(" %d %d",&a,&b);writeln(a*b);}\n',
        "void main() { int x = ; }\n",
        "unittest { assert(0 == 1); }\nvoid main() {}\n",  # SandboxFusion's failing unit test
        "void main() { for (;;) {} }\n",
        'import std.stdio;\nvoid main() { writeln("start"); stdout.flush(); ubyte[][] a;'
        " for (;;) { auto b = new ubyte[1 << 20]; b[] = 1; a ~= b; } }\n",
    ),
    "jest": (
        'import { readFileSync } from "fs";\n'
        'test("sum", () => { const [a, b] = readFileSync(0, "utf8").trim().split(/\\s+/)'
        ".map(Number); expect(a + b).toBe(5); });\n",
        'import { readFileSync } from "fs";\n'
        'test("sum", () => { const [a, b] = readFileSync(0, "utf8").trim().split(/\\s+/)'
        ".map(Number); expect(a * b).toBe(5); });\n",
        'test("broken", () => { const x: number = ; });\n',
        'throw new Error("boom");\n',
        'test("loop", () => { for (;;) {} });\n',
        'test("hog", () => { const a: Buffer[] = [];'
        " for (;;) a.push(Buffer.alloc(1 << 20, 1)); });\n",
    ),
}
# SandboxFusion compiles these in a step of their own; the others' compile errors fail the run
COMPILED = {"scala", "verilog", "D_ut"}
TEST_RUNNERS = {"jest"}  # the program is a test file: a wrong answer is a failed test
# start-up is slow (a JVM that compiles, a node that loads jest and babel): a loaded host is
# slow, not wrong
SLOW = {"kotlin_script": 60, "scala": 40, "jest": 40, "csharp": 20, "racket": 20, "R": 20}
# a test runner: its output is its report
NO_START = {"jest"}
MEMORY_MB = 256


def ask(url: str, language: str, code: str, **fields: Any) -> dict[str, Any]:
    slow = SLOW.get(language)
    if slow is not None:
        fields = {"run_timeout": slow, "compile_timeout": slow, **fields}
    return run_code(url, language, code, **fields)


@pytest.mark.parametrize("language", sorted(PROGRAMS))
def test_each_language_like_sandboxfusion(service_url: str, language: str) -> None:
    correct, wrong, broken, crashing, endless, hog = PROGRAMS[language]
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(ask, service_url, language, code) for code in (correct, wrong)]
        futures += [pool.submit(ask, service_url, language, code) for code in (broken, crashing)]
        futures.append(pool.submit(ask, service_url, language, endless, run_timeout=2))
        futures.append(pool.submit(ask, service_url, language, hog, memory_limit_MB=MEMORY_MB))
        ok, wa, ce, re, tle, mle = (f.result() for f in futures)

    assert ok["status"] == "Success", ok
    assert ok["run_result"]["return_code"] == 0
    if language not in TEST_RUNNERS:
        assert ok["run_result"]["stdout"].strip() == "5", ok
    if language in COMPILED:
        assert ok["compile_result"]["status"] == "Finished"
        assert ok["compile_result"]["return_code"] == 0
        assert ok["compile_result"]["execution_time"] > 0
    else:
        assert ok["compile_result"] is None

    if language in TEST_RUNNERS:
        assert wa["status"] == "Failed" and wa["run_result"]["return_code"] != 0, wa
    else:
        assert wa["status"] == "Success" and wa["run_result"]["stdout"].strip() == "6", wa

    assert ce["status"] == "Failed", ce
    if language in COMPILED:
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

    assert mle["status"] == "Failed", mle
    # killed for memory, or the language's own out-of-memory error (a JVM's, SQLite's)
    assert mle["run_result"]["status"] in ("MemoryLimitExceeded", "Finished"), mle
    assert mle["run_result"]["return_code"] != 0
    if language not in NO_START:
        assert mle["run_result"]["stdout"].startswith("start"), mle


@pytest.mark.parametrize("language", ["julia", "swift", "lean", "cuda", "python_gpu"])
def test_what_cannot_run_here_is_a_sandbox_error(service_url: str, language: str) -> None:
    response = httpx.post(
        f"{service_url}/run_code", json={"code": "println(1)", "language": language}, timeout=30
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["status"] == "SandboxError", answer
    assert language in answer["message"] and "not available" in answer["message"]
    assert answer["run_result"] is None and answer["compile_result"] is None


def test_sandboxfusion_bundles_are_there(service_url: str) -> None:
    perl = 'use Test::Deep; use Data::Compare;\nprint Compare([1], [1]) ? "same\\n" : "no\\n";\n'
    lua = 'local lu = require("luaunit")\nprint(type(lu.assertEquals))\n'
    jest = 'import _ from "lodash";\ntest("lodash", () => { expect(_.sum([2, 3])).toBe(5); });\n'
    with ThreadPoolExecutor(max_workers=3) as pool:
        perl_answer = pool.submit(ask, service_url, "perl", perl)
        lua_answer = pool.submit(ask, service_url, "lua", lua)
        jest_answer = pool.submit(ask, service_url, "jest", jest)
    assert perl_answer.result()["run_result"]["stdout"] == "same\n", perl_answer.result()
    assert lua_answer.result()["run_result"]["stdout"] == "function\n", lua_answer.result()
    assert jest_answer.result()["status"] == "Success", jest_answer.result()


def test_the_native_api_gives_their_compile_errors_their_verdict(http: httpx.Client) -> None:
    def body(code: str) -> dict[str, Any]:
        return {
            "task": {
                "image": "d",
                "language": "D_ut",
                "tests": {"format": "exit_code", "command": "./test | grep -qx 5"},
                "limits": {"timeout_s": 10, "compile_timeout_s": 30},
            },
            "solution": {"files": {"main.d": code}},
        }

    good = run(http, body("import std.stdio;\nvoid main() { writeln(2 + 3); }\n"))
    assert (good["verdict"], good["reward"]) == ("passed", 1.0), good
    assert good["timings"]["compile_s"] > 0
    bad = run(http, body(PROGRAMS["D_ut"][2]))
    assert (bad["verdict"], bad["reward"]) == ("compile_error", 0.0), bad
    assert bad["timings"]["compile_s"] > 0


def test_a_failed_csharp_debug_assert_ends_the_run_as_in_dotnet(service_url: str) -> None:
    # SandboxFusion's own case (test_csharp_assertion_error): Mono only logs a failed assert
    code = (
        "using System.Diagnostics;\npublic class Program { public static void Main() {"
        ' Console.WriteLine("before"); Debug.Assert(1 == 2, "Assertion failed");'
        ' Console.WriteLine("after"); } }\n'
    )
    answer = ask(service_url, "csharp", code)
    assert answer["status"] == "Failed", answer
    assert answer["run_result"]["stdout"] == "before\n"
    assert "Assertion failed" in answer["run_result"]["stderr"]
