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
| csharp                     | mono   | Program.cs    |                         | mcs, mono   |
| kotlin_script              | jvm    | main.kts      |                         | kotlinc -script |
| scala                      | jvm    | main.scala    | scalac                  | scala <object> |
| ruby                       | script | main.rb       |                         | ruby        |
| php                        | script | main.php      |                         | php -f (***)|
| perl                       | script | main.pl       |                         | perl        |
| lua                        | script | main.lua      |                         | lua (5.4)   |
| sql                        | script | main.sql      |                         | sqlite3 -bail |
| verilog                    | script | main.sv       | iverilog -g2012 -s tb   | vvp -n      |
| R                          | r      | main.R        |                         | Rscript     |
| racket                     | racket | main.rkt      |                         | racket      |
| D_ut                       | d      | main.d        | ldmd2 -unittest         | ./test      |
| jest                       | jest   | main.test.ts  |                         | jest (babel)|

The libraries SandboxFusion's runtimes bundle are in the images (images/sandbox-lang/README.md):
javatuples on java's class path, lodash and the rest of its node runtime on NODE_PATH, testify
and other Go libraries on the GOPATH.
(*) A program without a go.mod builds in GOPATH mode, where the image's Go libraries are:
nothing is downloaded (a request that brings its own go.mod is in module mode, offline).
(**) tsx's loader, as SandboxFusion runs TypeScript with tsx: esbuild strips the types
without checking them and gives ES default imports of CommonJS modules (`import assert from
"assert"`); no compile step, as in SandboxFusion.
(***) `<?php` is put first when the code lacks it, as SandboxFusion does.

The compile/run split is SandboxFusion's: where its runner has no compile step (csharp's
`dotnet run`, kotlin_script, jest), the run compiles, so a compile error is a failed run and
its time counts against `run_timeout`. C# runs on Mono (Debian has no .NET SDK): the usings
.NET's console template implies are put before the code (`#line 1` keeps the compiler's
line numbers the code's own), and `Debug.Assert` is on and a failed one ends the program
(exit 134, "Assertion failed" on stderr), as in `dotnet run`'s Debug build.
kotlin_script is Debian's Kotlin 1.3 and scala Debian's 2.11 (SandboxFusion: 2.0, 2.11); D
is LDC's `ldmd2`, which takes dmd's flags; sql is SQLite (the script is `.read`, so stdin is
the program's: `.import /dev/stdin`), which SandboxFusion names but cannot run.
SandboxFusion's julia, swift and lean have no Debian package and no package on the
registries a build here reaches, and cuda and python_gpu need a GPU: `UNAVAILABLE` says why,
and a request for one is answered as SandboxFusion answers a runner that cannot run.

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
# a compiler's JVM lives for seconds: C1 only and the serial collector halve its CPU time
JVM_QUICK = 'JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"'
JEST_HOME = "/opt/proctor/jest"  # images/sandbox-lang/npm/jest, installed by the image build
# the global usings of .NET's console template (ImplicitUsings), which SandboxFusion's C# has
CSHARP_USINGS = (
    "using System; using System.Collections.Generic; using System.IO; using System.Linq; "
    "using System.Threading; using System.Threading.Tasks;"
)
# a failed Debug.Assert ends the program as in .NET (Mono's default listener only logs it):
# a listener compiled beside the code, named in the program's config file
CSHARP_ASSERT = (
    "public sealed class ProctorAssertListener : System.Diagnostics.DefaultTraceListener {"
    " public override void Fail(string message, string detail) { System.Console.Out.Flush();"
    ' System.Console.Error.WriteLine("Process terminated. Assertion failed." +'
    ' (message == null ? "" : "\\n" + message) + (detail == null ? "" : "\\n" + detail));'
    " System.Environment.Exit(134); } }"
)
CSHARP_CONFIG = (
    '<configuration><system.diagnostics><trace><listeners><clear/><add name="proctor" '
    'type="ProctorAssertListener, main"/></listeners></trace></system.diagnostics></configuration>'
)


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
    Language(
        "csharp",
        "mono",
        "Program.cs",
        # SandboxFusion's `dotnet run` builds in its run: so does this
        f"{{ printf '%s\\n#line 1\\n' '{CSHARP_USINGS}'; cat Program.cs; }} >.Program.cs && "
        f"printf '%s' '{CSHARP_ASSERT}' >.Assert.cs && "
        f"printf '%s' '{CSHARP_CONFIG}' >main.exe.config && "
        "mcs -d:DEBUG -debug- -nologo -langversion:experimental -out:main.exe .Program.cs "
        ".Assert.cs >&2 && MONO_ENV_OPTIONS=--debug mono main.exe",
    ),
    # Debian's Kotlin 1.3 has no `kotlin file.kts` runner; kotlinc runs the script
    Language("kotlin_script", "jvm", "main.kts", f"{JVM_QUICK} kotlinc -nowarn -script main.kts"),
    Language(
        "scala",
        "jvm",
        "main.scala",
        # the object SandboxFusion runs: the first `object <Name>` of the code
        "scala -nc -cp . \"$(grep -m1 -oE 'object[[:space:]]+[A-Za-z_][A-Za-z0-9_]*' "
        "main.scala | awk '{print $2}')\"",
        compile=f"{JVM_QUICK} scalac -nowarn -d . main.scala",
    ),
    Language("ruby", "script", "main.rb", "ruby main.rb"),
    Language(
        "php",
        "script",
        "main.php",
        "{ grep -qz '^[[:space:]]*<?php' main.php || sed -i '1s/^/<?php\\n/' main.php; } && "
        "php -f main.php",
    ),
    Language("perl", "script", "main.pl", "perl main.pl"),
    Language("lua", "script", "main.lua", "lua main.lua"),
    Language("sql", "script", "main.sql", "sqlite3 -bail -batch :memory: '.read main.sql'"),
    Language(
        "verilog",
        "script",
        "main.sv",
        "vvp -n test.vvp",
        # SandboxFusion's flags (verilog-eval's): the testbench is module `tb`
        compile="iverilog -Wall -Winfloop -Wno-timescale -g2012 -s tb -o test.vvp main.sv",
    ),
    Language("R", "r", "main.R", "Rscript main.R"),
    Language("racket", "racket", "main.rkt", "racket main.rkt"),
    Language("D_ut", "d", "main.d", "./test", compile="ldmd2 -unittest -of=test main.d"),
    Language(
        "jest",
        "jest",
        "main.test.ts",
        # SandboxFusion links its runtime's node_modules and configuration into the directory
        f"ln -sfn {JEST_HOME}/node_modules node_modules && "
        f"cp {JEST_HOME}/package.json {JEST_HOME}/babel.config.js . && "
        "FORCE_COLOR=0 node node_modules/jest/bin/jest.js --ci",
    ),
)
# SandboxFusion's languages this deployment cannot run, and why (a request for one is not
# the code's fault: `/run_code` answers it as a SandboxError)
UNAVAILABLE: dict[str, str] = {
    "julia": "no Julia toolchain: Debian has no julia package and no registry a build "
    "reaches ships one",
    "swift": "no Swift toolchain: Debian's `swift` is OpenStack's object store, and no "
    "registry a build reaches ships swiftc",
    "lean": "no Lean 4 toolchain: elan downloads it from outside the package registries, "
    "which a build here cannot reach",
    "cuda": "no GPU on this deployment's sandbox hosts",
    "python_gpu": "no GPU on this deployment's sandbox hosts",
}

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
