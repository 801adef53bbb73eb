"""The languages a task may be written in: image, source file, compile and run commands.

Names and semantics are SandboxFusion's (`language` of `POST /run_code`), so a trainer that
sends `cpp` or `nodejs` gets what SandboxFusion would run. A language with a compile command
compiles in its own step, limited like any run (`compile_timeout`); a program that does not
compile is the code's fault (`compile_error`), never ours.

| language                   | image  | source        | compile                 | run         |
|----------------------------|--------|---------------|-------------------------|-------------|
| python                     | python-sci | main.py   |                         | python3     |
| pytest                     | python-sci | test_main.py |                      | pytest      |
| bash                       | python | main.sh       |                         | bash        |
| cpp                        | cpp    | main.cpp      | g++ -std=c++17 -O2      | ./main      |
| c                          | cpp    | main.c        | gcc -std=c11 -O2 -lm    | ./main      |
| java                       | java   | Main.java     | javac (cp: ., *.jar)    | java -ea    |
| junit                      | java   | <class>.java  | javac *.java            | JUnit 5     |
| go                         | go     | main.go       | go build (*)            | ./main      |
| go_test                    | go     | main_test.go  | go test -c (*)          | -test.v, ok |
| nodejs (js, javascript)    | node   | main.js       |                         | node        |
| typescript (ts)            | node   | main.ts       |                         | tsx's (**)  |
| rust                       | rust   | main.rs       | rustc -O                | ./main      |

The libraries SandboxFusion's runtimes bundle are in the images (images/sandbox-lang/README.md):
javatuples on java's class path, lodash and the rest of its node runtime on NODE_PATH, testify
and other Go libraries on the GOPATH.
(*) A program without a go.mod builds in GOPATH mode, where the image's Go libraries are:
nothing is downloaded (a request that brings its own go.mod is in module mode, offline).
(**) tsx's loader, as SandboxFusion runs TypeScript with tsx: esbuild strips the types
without checking them and gives ES default imports of CommonJS modules (`import assert from
"assert"`); no compile step, as in SandboxFusion.

No Docker here and nothing else imported: the adapter and the grading phase both read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WORKSPACE = "/workspace"
# SandboxFusion's javac/java class path: the workspace, the libraries its runner bundles, then
# any jar the request brought
JAVATUPLES_JAR = "/usr/share/java/javatuples.jar"
JAVA_CLASSPATH = f'".:{JAVATUPLES_JAR}:$(ls *.jar 2>/dev/null | tr "\\n" ":")"'
JUNIT_JAR = "/usr/share/java/junit-platform-console-standalone.jar"
# tsx's loader in node itself: what `tsx main.ts` runs, without the second node process its
# command line starts to run it in (a fifth less CPU, half the wall time on a busy host)
TSX_LOADER = "file:///usr/local/lib/node_modules/tsx/dist/loader.mjs"


@dataclass(frozen=True, slots=True)
class Language:
    """One `language` value: where its code goes and the commands that build and run it."""

    name: str
    image: str  # a task image name (the allowlist's key), not a reference
    source: str  # the file the code is written to, relative to the workspace
    run: str  # bash; runs in the workspace
    compile: str | None = None  # bash; None: interpreted
    aliases: tuple[str, ...] = ()

    @property
    def compiled(self) -> bool:
        return self.compile is not None


_TABLE = (
    # SandboxFusion's Python runtime ships numpy, pandas, scipy ...: so does python-sci
    Language("python", "python-sci", "main.py", "python3 main.py"),
    Language(
        "pytest",
        "python-sci",
        "test_main.py",
        "python3 -m pytest -q -p no:cacheprovider test_main.py",
    ),
    Language("bash", "python", "main.sh", "bash main.sh"),
    Language(
        "cpp",
        "cpp",
        "main.cpp",
        "./main",
        compile="g++ -std=c++17 -O2 -pipe main.cpp -o main -lpthread",
    ),
    Language("c", "cpp", "main.c", "./main", compile="gcc -std=c11 -O2 -pipe main.c -o main -lm"),
    Language(
        "java",
        "java",
        "Main.java",
        f"java -cp {JAVA_CLASSPATH} -ea Main",
        compile=f"javac -encoding UTF-8 -cp {JAVA_CLASSPATH} Main.java",
    ),
    Language(
        "junit",
        "java",
        "Main.java",  # renamed to its public class (`source_for`)
        f"java -jar {JUNIT_JAR} --disable-banner --details=tree "
        f'--class-path "$(ls *.jar 2>/dev/null | tr "\\n" ":"):." --scan-class-path',
        compile=f'javac -encoding UTF-8 -cp "{JUNIT_JAR}:$(ls *.jar 2>/dev/null | tr "\\n" ":")." '
        "*.java",
    ),
    Language("go", "go", "main.go", "./main", compile="go build -o main main.go"),
    Language(
        "go_test",
        "go",
        "main_test.go",
        # and the line `go test` ends with (SandboxFusion runs `go test`, its tests read it)
        '( ./main.test -test.v; status=$?; if [ $status -eq 0 ]; then printf "ok  \\tsandbox\\n"; '
        'else printf "FAIL\\tsandbox\\n"; fi; exit $status )',
        compile="go test -c -o main.test",
    ),
    Language("nodejs", "node", "main.js", "node main.js", aliases=("js", "javascript")),
    Language(
        "typescript", "node", "main.ts", f"node --import {TSX_LOADER} main.ts", aliases=("ts",)
    ),
    Language("rust", "rust", "main.rs", "./main", compile="rustc -O main.rs -o main"),
)

LANGUAGES: dict[str, Language] = {
    name: language for language in _TABLE for name in (language.name, *language.aliases)
}
_PUBLIC_CLASS = re.compile(r"^\s*public\s+(?:final\s+|abstract\s+)*class\s+(\w+)", re.MULTILINE)


class UnknownLanguage(ValueError):
    """A `language` this deployment does not know (the request's fault)."""


def language(name: str) -> Language:
    try:
        return LANGUAGES[name]
    except KeyError:
        raise UnknownLanguage(
            f"language {name!r} is not supported; supported: {', '.join(names())}"
        ) from None


def names() -> list[str]:
    return sorted(LANGUAGES)


def source_for(lang: Language, code: str) -> str:
    """The file the code goes to: a junit test class must sit in a file of its name."""
    if lang.name == "junit":
        match = _PUBLIC_CLASS.search(code)
        return f"{match.group(1)}.java" if match else lang.source
    return lang.source
