"""Compile time on a busy host: the old wall-clock limit beside the compiler's own time and
the compile cache, per compiled language, with SandboxFusion's compile timeouts.

    python bench/compile_time.py [--hogs 2] [--samples 3] [--languages cpp,rust,...]

While `--hogs` processes spin on the CPU (a host that other work keeps busy), each
language's program (SandboxFusion-shaped: the same code as a `/run_code` body, with the
`compile_timeout` SandboxFusion's own tests give that language) is compiled three ways:
  - before:  the compile command in a fresh container of the language's image under a
             wall-clock limit of `compile_timeout` (`timeout`), as the compile step was
             limited before; what a fresh sandbox pays (a cold page cache, a cold Go cache)
  - cold:    `POST /run_code` with a program never seen (a comment makes it new): the
             compile step limited by the compiler's own time, its program then cached
  - cached:  the same `POST /run_code` again: the program comes from the host's cache
Reported per language: compile seconds (p50; the service's `compile_result.execution_time`,
the host's wall clock for `before`), how many of the samples ran out of `compile_timeout`,
and the whole request's p50.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from harness import machine, service, summary, table, write

from core.languages import language as language_of
from core.languages import source_for

# SandboxFusion's own tests' compile_timeout per language (its test suite, replayed in
# issue 34): rust and go at 1 s, `go test -c` and javac at 10 s
SF_COMPILE_TIMEOUT = {
    "cpp": 10.0,
    "c": 10.0,
    "rust": 1.0,
    "go": 1.0,
    "go_test": 10.0,
    "java": 10.0,
    "junit": 10.0,
}
PROGRAMS = {
    "cpp": '#include <bits/stdc++.h>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a+b<<"\\n";}\n',
    "c": "#include <stdio.h>\n"
    'int main(void){long a,b;scanf("%ld %ld",&a,&b);printf("%ld\\n",a+b);}\n',
    "rust": "use std::io::Read;\nfn main(){let mut s=String::new();"
    "std::io::stdin().read_to_string(&mut s).unwrap();"
    "let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();"
    'println!("{}",v[0]+v[1]);}\n',
    "go": 'package main\nimport "fmt"\nfunc main(){var a,b int64\nfmt.Scan(&a,&b)\n'
    "fmt.Println(a+b)}\n",
    "go_test": 'package main\nimport "testing"\n'
    'func TestAdd(t *testing.T){if 1+2!=3{t.Fatal("x")}}\n',
    "java": "import java.util.*;\npublic class Main{public static void main(String[] a){"
    "Scanner s=new Scanner(System.in);System.out.println(s.nextLong()+s.nextLong());}}\n",
    "junit": "import org.junit.jupiter.api.Test;\n"
    "import static org.junit.jupiter.api.Assertions.assertEquals;\n"
    "public class AddTest{@Test void adds(){assertEquals(3,1+2);}}\n",
}
COMMENT = {"rust": "//", "go": "//", "go_test": "//"}
STDIN = "1 2\n"
IMAGE = "proctor/sandbox-{}:latest"


def tagged(language: str, tag: str) -> str:
    return PROGRAMS[language] + f"{COMMENT.get(language, '//')} {tag}\n"


def hogs(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


TIMED = """import subprocess, sys, time
started = time.monotonic()
done = subprocess.run(["timeout", "-s", "KILL", sys.argv[1], "bash", "-c", sys.argv[2]])
print(done.returncode, round(time.monotonic() - started, 3))
"""


def before(language: str, tag: str) -> dict[str, Any]:
    """The compile in a fresh container of the image, limited by the wall clock."""
    lang = language_of(language)
    assert lang.compile is not None
    limit = SF_COMPILE_TIMEOUT[language]
    with tempfile.TemporaryDirectory() as scratch:
        name = source_for(lang, PROGRAMS[language])
        (Path(scratch) / name).write_text(tagged(language, tag))
        (Path(scratch) / "timed.py").write_text(TIMED)
        Path(scratch).chmod(0o755)
        for path in Path(scratch).iterdir():
            path.chmod(0o644)
        command = [
            "docker", "run", "--rm", "--network", "none", "-v", f"{scratch}:/src:ro",
            "-w", "/workspace", IMAGE.format(lang.image), "bash", "-c",
            f'cp /src/{name} . && python3 /src/timed.py {limit:g} "$0"', lang.compile,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    code, _, took = done.stdout.strip().rpartition("\n")[2].partition(" ")
    return {"timed_out": code == "-9" or code == "137", "compile_s": _float(took)}


def _float(text: str) -> float | None:
    try:
        return round(float(text), 3)
    except ValueError:
        return None


def proctor(client: httpx.Client, language: str, tag: str) -> dict[str, Any]:
    body = {
        "code": tagged(language, tag),
        "language": language,
        "stdin": STDIN,
        "compile_timeout": SF_COMPILE_TIMEOUT[language],
        "run_timeout": 10,
        "memory_limit_MB": 1024,
        "files": {},
        "fetch_files": [],
    }
    started = time.perf_counter()
    answer = client.post("/run_code", json=body).json()
    total = time.perf_counter() - started
    built = answer.get("compile_result") or {}
    return {
        "timed_out": built.get("status") == "TimeLimitExceeded",
        "compile_s": built.get("execution_time"),
        "ok": answer.get("status") == "Success",
        "total_s": round(total, 3),
    }


def row(language: str, mode: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    compiles = [c["compile_s"] for c in cases if c.get("compile_s") is not None]
    totals = [c["total_s"] for c in cases if "total_s" in c]
    return {
        "language": language,
        "mode": mode,
        "compile_timeout_s": SF_COMPILE_TIMEOUT[language],
        "samples": len(cases),
        "timeouts": sum(c["timed_out"] for c in cases),
        "succeeded": sum(c.get("ok", not c["timed_out"]) for c in cases),
        "compile_p50_s": summary(compiles)["p50_s"] if compiles else "",
        "request_p50_s": summary(totals)["p50_s"] if totals else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--languages", default=",".join(SF_COMPILE_TIMEOUT))
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    languages = args.languages.split(",")
    run = f"bench {time.time_ns()}"
    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory() as cache_dir,
        service(workers=str(args.workers), compile_cache_dir=cache_dir) as url,
        httpx.Client(base_url=url, timeout=600) as client,
    ):
        spinning = hogs(args.hogs)
        try:
            for language in languages:
                old = [before(language, f"{run} before {i}") for i in range(args.samples)]
                cold, cached = [], []
                for i in range(args.samples):
                    tag = f"{run} proctor {i}"
                    cold.append(proctor(client, language, tag))
                    cached.append(proctor(client, language, tag))
                rows += [
                    row(language, "before (wall, fresh sandbox)", old),
                    row(language, "cold (own time)", cold),
                    row(language, "cached", cached),
                ]
                print(table(rows[-3:], list(rows[-1])), flush=True)
        finally:
            for hog in spinning:
                hog.kill()
                hog.wait()
    columns = list(rows[0])
    print(table(rows, columns))
    path = write(
        "compile_time",
        {"machine": machine(), "hogs": args.hogs, "samples": args.samples, "rows": rows},
    )
    print(f"written to {path}")


if __name__ == "__main__":
    main()
