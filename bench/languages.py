"""Each language through `/run_code` beside the same programs compiled and run on the host.

    python bench/languages.py [--concurrency 1,4] [--workers 2] [--languages cpp,java,ruby,...]
        [--cases]

A problem set of stdin/stdout programs (each in C++ and Java, with an input and the answer a
Python reference computes) runs twice in one run:
  - host:     `g++ -std=c++17 -O2` / `javac` then the program, as plain subprocesses in a
              scratch directory (no isolation at all); g++ and a JDK are installed with apt
              when the host lacks them (this bench only)
  - Proctor:  SandboxFusion's `POST /run_code`, as verl sends it: HTTP → Redis/RQ → a fresh
              hardened container of the language's image, compile step, run, verdict
The ratio is Proctor's latency over the host's, per program (p50 over programs); every
answer is checked against the reference, so a fast wrong answer does not count.

`--cases` adds the Code-Contests-shaped set (`bench/contest.py`): one C++ and one Python
solution x 50 stdin cases in one request, beside the same program run 50 times on the host.

SandboxFusion's other languages (csharp, kotlin_script, scala, ruby, php, perl, lua, sql,
verilog, R, racket, D_ut, jest) run one program each (the sum of n integers), REPEATS times:
on the host with the very compile and run commands of core/languages.py (their Debian
packages installed with apt when missing; jest from the image build's npm directory), and
through `/run_code`.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import contest
import httpx
from harness import machine, service, summary, table, write

from core import languages

HOST_COMPILE = {
    "cpp": ["g++", "-std=c++17", "-O2", "-pipe", "main.cpp", "-o", "main"],
    "java": ["javac", "-encoding", "UTF-8", "Main.java"],
}
HOST_RUN = {"cpp": ["./main"], "java": ["java", "-cp", ".", "-ea", "Main"]}
SOURCE = {"cpp": "main.cpp", "java": "Main.java"}
HOST_PACKAGES = {"cpp": ("g++", "g++"), "java": ("javac", "openjdk-17-jdk-headless")}

# SandboxFusion's other languages: the sum of n integers, each in the language
SUM_STDIN = "5\n1 2 3 4 5\n"
SUM_PROGRAMS = {
    "csharp": "public class Program { public static void Main() { Console.ReadLine();"
    " Console.WriteLine(Console.ReadLine().Split(' ').Select(long.Parse).Sum()); } }",
    "kotlin_script": "readLine()\n"
    'println(readLine()!!.trim().split(" ").map { it.toLong() }.sum())',
    "scala": "object Main { def main(args: Array[String]): Unit = { scala.io.StdIn.readLine();"
    ' println(scala.io.StdIn.readLine().trim.split(" ").map(_.toLong).sum) } }',
    "ruby": "gets\nputs gets.split.map(&:to_i).sum",
    "php": "fgets(STDIN);\necho array_sum(array_map('intval', explode(' ', trim(fgets(STDIN))))),"
    ' "\\n";',
    "perl": "<STDIN>;\nmy $s = 0;\n$s += $_ for split ' ', <STDIN>;\nprint \"$s\\n\";",
    "lua": 'local n = io.read("n")\nlocal s = 0\nfor _ = 1, n do s = s + io.read("n") end\n'
    "print(math.tointeger(s))",
    "sql": "CREATE TABLE t(x TEXT);\n.import /dev/stdin t\nSELECT sum(j.value) FROM t,"
    " json_each('[' || replace(trim(t.x), ' ', ',') || ']') AS j WHERE t.rowid = 2;",
    "verilog": "module tb; integer n, i, x, s, r; initial begin s = 0;"
    ' r = $fscanf(32\'h8000_0000, "%d", n); for (i = 0; i < n; i = i + 1) begin'
    ' r = $fscanf(32\'h8000_0000, "%d", x); s = s + x; end $display("%0d", s); $finish;'
    " end endmodule",
    "R": 'x <- scan(file("stdin"), quiet = TRUE)\ncat(sum(x[-1]), "\\n", sep = "")',
    "racket": "#lang racket\n(define n (read))\n(displayln (for/sum ([_ (in-range n)]) (read)))",
    "D_ut": "import std.stdio, std.algorithm, std.array, std.conv, std.string;\n"
    "void main(){readln();writeln(readln().strip.split.map!(to!long).sum);}",
    "jest": 'import { readFileSync } from "fs";\ntest("sum", () => {'
    ' const [n, ...xs] = readFileSync(0, "utf8").trim().split(/\\s+/).map(Number);'
    " expect(xs.length).toBe(n); console.log(xs.reduce((a, b) => a + b, 0)); });",
}
SUM_ANSWER = "15"
REPEATS = 8
# the host's commands for SandboxFusion's other languages: the Debian packages of their images
HOST_DEBIANS = {
    "csharp": ("mono-mcs", "mono-runtime"),
    "kotlin_script": ("kotlin",),
    "scala": ("scala",),
    "ruby": ("ruby",),
    "php": ("php-cli",),
    "perl": ("perl",),
    "lua": ("lua5.4",),
    "sql": ("sqlite3",),
    "verilog": ("iverilog",),
    "R": ("r-base-core",),
    "racket": ("racket",),
    "D_ut": ("ldc", "gcc", "libc6-dev"),
    "jest": (),
}
# jest's runtime as the image build installed it (proctor/imagebuild/npm.py)
HOST_JEST = Path(__file__).resolve().parents[1] / "images" / ".wheels" / "npm" / "jest"

CPP_HEAD = "#include <bits/stdc++.h>\nusing namespace std;\n"
JAVA_HEAD = "import java.util.*;\nimport java.io.*;\n"


@dataclass(frozen=True)
class Problem:
    name: str
    stdin: str
    reference: Callable[[str], str]  # the expected stdout, from the input
    cpp: str
    java: str


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split()]


def _primes(n: int) -> int:
    sieve = bytearray([1]) * (n + 1)
    sieve[0:2] = b"\0\0"
    for i in range(2, int(n**0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(sieve[i * i :: i]))
    return sum(sieve)


def _lis(values: list[int]) -> int:
    import bisect

    tails: list[int] = []
    for v in values:
        i = bisect.bisect_left(tails, v)
        tails[i : i + 1] = [v]
    return len(tails)


def _queens(n: int) -> int:
    def place(row: int, cols: int, d1: int, d2: int) -> int:
        if row == n:
            return 1
        count = 0
        free = ~(cols | d1 | d2) & ((1 << n) - 1)
        while free:
            bit = free & -free
            free ^= bit
            count += place(row + 1, cols | bit, (d1 | bit) << 1, (d2 | bit) >> 1)
        return count

    return place(0, 0, 0, 0)


def _knapsack(text: str) -> int:
    n, cap, *rest = _ints(text)
    best = [0] * (cap + 1)
    for i in range(n):
        w, v = rest[2 * i], rest[2 * i + 1]
        for c in range(cap, w - 1, -1):
            best[c] = max(best[c], best[c - w] + v)
    return best[cap]


def _lcg(n: int, seed: int, mod: int) -> list[int]:
    out, x = [], seed
    for _ in range(n):
        x = (x * 1103515245 + 12345) % 2147483648
        out.append(x % mod)
    return out


RANDOM = _lcg(2000, 7, 100000)
KNAP = "60 500 " + " ".join(
    f"{w} {v}" for w, v in zip(_lcg(60, 3, 50), _lcg(60, 5, 100), strict=True)
)

PROBLEMS = [
    Problem(
        "sum",
        "5\n1 2 3 4 5\n",
        lambda t: str(sum(_ints(t)[1:])),
        CPP_HEAD + "int main(){long n,s=0,x;cin>>n;while(n--){cin>>x;s+=x;}cout<<s<<endl;}",
        JAVA_HEAD + "public class Main{public static void main(String[] a){Scanner s=new "
        "Scanner(System.in);long n=s.nextLong(),t=0;while(n-->0)t+=s.nextLong();"
        "System.out.println(t);}}",
    ),
    Problem(
        "primes",
        "2000000\n",
        lambda t: str(_primes(int(t))),
        CPP_HEAD + "int main(){int n;cin>>n;vector<char> p(n+1,1);p[0]=p[1]=0;int c=0;"
        "for(long i=2;i<=n;i++)if(p[i]){c++;for(long j=i*i;j<=n;j+=i)p[j]=0;}cout<<c<<endl;}",
        JAVA_HEAD + "public class Main{public static void main(String[] a){int n=new "
        "Scanner(System.in).nextInt();boolean[] q=new boolean[n+1];int c=0;for(long i=2;i<=n;"
        "i++)if(!q[(int)i]){c++;for(long j=i*i;j<=n;j+=i)q[(int)j]=true;}System.out.println(c);}}",
    ),
    Problem(
        "fib-mod",
        "10000000\n",
        lambda t: str(_fib_mod(int(t))),
        CPP_HEAD + "int main(){long n;cin>>n;long a=0,b=1;for(long i=0;i<n;i++){long c=(a+b)"
        "%1000000007;a=b;b=c;}cout<<a<<endl;}",
        JAVA_HEAD + "public class Main{public static void main(String[] x){long n=new "
        "Scanner(System.in).nextLong(),a=0,b=1;for(long i=0;i<n;i++){long c=(a+b)%1000000007L;"
        "a=b;b=c;}System.out.println(a);}}",
    ),
    Problem(
        "sort",
        f"{len(RANDOM)}\n" + " ".join(map(str, RANDOM)) + "\n",
        lambda t: " ".join(map(str, sorted(_ints(t)[1:]))),
        CPP_HEAD + "int main(){int n;cin>>n;vector<long> v(n);for(auto&x:v)cin>>x;"
        'sort(v.begin(),v.end());for(int i=0;i<n;i++)cout<<v[i]<<(i+1<n?" ":"\\n");}',
        JAVA_HEAD + "public class Main{public static void main(String[] a)throws IOException{"
        "BufferedReader r=new BufferedReader(new InputStreamReader(System.in));int n="
        "Integer.parseInt(r.readLine().trim());long[] v=Arrays.stream(r.readLine().trim()"
        '.split(" ")).mapToLong(Long::parseLong).toArray();Arrays.sort(v);StringBuilder b=new '
        'StringBuilder();for(int i=0;i<n;i++){b.append(v[i]);b.append(i+1<n?" ":"\\n");}'
        "System.out.print(b);}}",
    ),
    Problem(
        "reverse",
        "hello proctor sandbox\n",
        lambda t: t.strip()[::-1],
        CPP_HEAD + "int main(){string s;getline(cin,s);reverse(s.begin(),s.end());cout<<s<<endl;}",
        JAVA_HEAD + "public class Main{public static void main(String[] a){String s=new "
        "Scanner(System.in).nextLine();System.out.println(new StringBuilder(s).reverse());}}",
    ),
    Problem(
        "words",
        "the quick brown fox jumps over the lazy dog the end\n",
        lambda t: str(len(set(t.split()))),
        CPP_HEAD + "int main(){set<string> w;string s;while(cin>>s)w.insert(s);"
        "cout<<w.size()<<endl;}",
        JAVA_HEAD + "public class Main{public static void main(String[] a){Scanner s=new "
        "Scanner(System.in);Set<String> w=new HashSet<>();while(s.hasNext())w.add(s.next());"
        "System.out.println(w.size());}}",
    ),
    Problem(
        "gcd",
        "4\n12 18\n100 75\n17 5\n1071 462\n",
        lambda t: "\n".join(str(_gcd(a, b)) for a, b in _pairs(_ints(t)[1:])),
        CPP_HEAD + "int main(){int n;cin>>n;while(n--){long a,b;cin>>a>>b;cout<<__gcd(a,b)"
        "<<endl;}}",
        JAVA_HEAD + "public class Main{static long g(long a,long b){return b==0?a:g(b,a%b);}"
        "public static void main(String[] x){Scanner s=new Scanner(System.in);int n=s.nextInt();"
        "while(n-->0)System.out.println(g(s.nextLong(),s.nextLong()));}}",
    ),
    Problem(
        "matrix",
        "120\n",
        lambda t: str(_matrix_trace(int(t))),
        CPP_HEAD + "int main(){int n;cin>>n;vector<vector<long>> A(n,vector<long>(n)),C(n,"
        "vector<long>(n,0));for(int i=0;i<n;i++)for(int j=0;j<n;j++)A[i][j]=(i*7+j*3)%10;"
        "for(int i=0;i<n;i++)for(int k=0;k<n;k++)for(int j=0;j<n;j++)C[i][j]+=A[i][k]*A[k][j];"
        "long t=0;for(int i=0;i<n;i++)t+=C[i][i];cout<<t<<endl;}",
        JAVA_HEAD + "public class Main{public static void main(String[] x){int n=new Scanner("
        "System.in).nextInt();long[][] A=new long[n][n],C=new long[n][n];for(int i=0;i<n;i++)"
        "for(int j=0;j<n;j++)A[i][j]=(i*7+j*3)%10;for(int i=0;i<n;i++)for(int k=0;k<n;k++)"
        "for(int j=0;j<n;j++)C[i][j]+=A[i][k]*A[k][j];long t=0;for(int i=0;i<n;i++)t+=C[i][i];"
        "System.out.println(t);}}",
    ),
    Problem(
        "lis",
        f"{len(RANDOM)}\n" + " ".join(map(str, RANDOM)) + "\n",
        lambda t: str(_lis(_ints(t)[1:])),
        CPP_HEAD + "int main(){int n;cin>>n;vector<long> t;while(n--){long x;cin>>x;auto it="
        "lower_bound(t.begin(),t.end(),x);if(it==t.end())t.push_back(x);else *it=x;}"
        "cout<<t.size()<<endl;}",
        JAVA_HEAD + "public class Main{public static void main(String[] a){Scanner s=new "
        "Scanner(System.in);int n=s.nextInt();long[] t=new long[n];int m=0;for(int i=0;i<n;"
        "i++){long x=s.nextLong();int lo=0,hi=m;while(lo<hi){int md=(lo+hi)/2;if(t[md]<x)"
        "lo=md+1;else hi=md;}t[lo]=x;if(lo==m)m++;}System.out.println(m);}}",
    ),
    Problem(
        "knapsack",
        KNAP + "\n",
        lambda t: str(_knapsack(t)),
        CPP_HEAD + "int main(){int n,c;cin>>n>>c;vector<long> b(c+1,0);while(n--){int w;long v;"
        "cin>>w>>v;for(int k=c;k>=w;k--)b[k]=max(b[k],b[k-w]+v);}cout<<b[c]<<endl;}",
        JAVA_HEAD + "public class Main{public static void main(String[] a){Scanner s=new "
        "Scanner(System.in);int n=s.nextInt(),c=s.nextInt();long[] b=new long[c+1];while(n-->0)"
        "{int w=s.nextInt();long v=s.nextLong();for(int k=c;k>=w;k--)b[k]=Math.max(b[k],b[k-w]+v);}"
        "System.out.println(b[c]);}}",
    ),
    Problem(
        "queens",
        "9\n",
        lambda t: str(_queens(int(t))),
        CPP_HEAD + "int n;long go(int r,int c,int a,int b){if(r==n)return 1;long k=0;int f=~(c|a|b)"
        "&((1<<n)-1);while(f){int t=f&-f;f^=t;k+=go(r+1,c|t,(a|t)<<1,(b|t)>>1);}return k;}"
        "int main(){cin>>n;cout<<go(0,0,0,0)<<endl;}",
        JAVA_HEAD + "public class Main{static int n;static long go(int r,int c,int a,int b){if"
        "(r==n)return 1;long k=0;int f=~(c|a|b)&((1<<n)-1);while(f!=0){int t=f&-f;f^=t;k+=go(r+1,"
        "c|t,(a|t)<<1,(b|t)>>1);}return k;}public static void main(String[] x){n=new Scanner("
        "System.in).nextInt();System.out.println(go(0,0,0,0));}}",
    ),
    Problem(
        "prefix",
        "6 3\n3 1 4 1 5 9\n1 3\n2 6\n4 4\n",
        lambda t: _prefix(t),
        CPP_HEAD + "int main(){int n,q;cin>>n>>q;vector<long> p(n+1,0);for(int i=1;i<=n;i++)"
        "{long x;cin>>x;p[i]=p[i-1]+x;}while(q--){int l,r;cin>>l>>r;cout<<p[r]-p[l-1]<<endl;}}",
        JAVA_HEAD + "public class Main{public static void main(String[] a){Scanner s=new "
        "Scanner(System.in);int n=s.nextInt(),q=s.nextInt();long[] p=new long[n+1];for(int i=1;"
        "i<=n;i++)p[i]=p[i-1]+s.nextLong();while(q-->0){int l=s.nextInt(),r=s.nextInt();"
        "System.out.println(p[r]-p[l-1]);}}}",
    ),
]


def _fib_mod(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % 1000000007
    return a


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def _pairs(values: list[int]) -> list[tuple[int, int]]:
    return list(zip(values[::2], values[1::2], strict=True))


def _matrix_trace(n: int) -> int:
    a = [[(i * 7 + j * 3) % 10 for j in range(n)] for i in range(n)]
    return sum(a[i][k] * a[k][i] for i in range(n) for k in range(n))


def _prefix(text: str) -> str:
    values = _ints(text)
    n, q = values[0], values[1]
    xs = values[2 : 2 + n]
    queries = _pairs(values[2 + n : 2 + n + 2 * q])
    return "\n".join(str(sum(xs[l - 1 : r])) for l, r in queries)  # noqa: E741


def ensure_host_tools(languages: list[str]) -> None:
    """The host baseline's compilers, installed with apt when missing (this bench only)."""
    missing = [
        pkg
        for lang in languages
        if lang in HOST_PACKAGES
        for cmd, pkg in [HOST_PACKAGES[lang]]
        if not shutil.which(cmd)
    ]
    wanted = [pkg for lang in languages for pkg in HOST_DEBIANS.get(lang, ())]
    if wanted:
        listed = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n", *wanted],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split("\n")
        have = {line.split()[0] for line in listed if line.endswith(" installed")}
        missing += [pkg for pkg in wanted if pkg not in have]
    if missing:
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], check=True
        )


def source(language: str, problem: Problem, tag: str) -> str:
    """The program with a comment naming the pass: identical requests would share one
    episode (the service deduplicates retries), and each pass must run its own."""
    return f"// {tag}\n{getattr(problem, language)}"


def host_case(language: str, problem: Problem, tag: str) -> dict[str, Any]:
    """Compile and run on the host in a scratch directory; wall time of both."""
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        (work / SOURCE[language]).write_text(source(language, problem, tag))
        started = time.perf_counter()
        built = subprocess.run(HOST_COMPILE[language], cwd=work, capture_output=True, check=False)
        compile_s = time.perf_counter() - started
        if built.returncode != 0:
            return {"ok": False, "total_s": compile_s, "error": built.stderr.decode()[-500:]}
        ran = subprocess.run(
            HOST_RUN[language],
            cwd=work,
            input=problem.stdin.encode(),
            capture_output=True,
            timeout=60,
            check=False,
        )
        total = time.perf_counter() - started
    out = ran.stdout.decode().strip()
    return {
        "ok": ran.returncode == 0 and out == problem.reference(problem.stdin),
        "compile_s": compile_s,
        "run_s": total - compile_s,
        "total_s": total,
    }


def proctor_case(client: httpx.Client, language: str, problem: Problem, tag: str) -> dict[str, Any]:
    body = {
        "code": source(language, problem, tag),
        "language": language,
        "stdin": problem.stdin,
        "compile_timeout": 60,
        "run_timeout": 30,
        "memory_limit_MB": 1024,
        "files": {},
        "fetch_files": [],
    }
    started = time.perf_counter()
    answer = client.post("/run_code", json=body).json()
    total = time.perf_counter() - started
    run = answer.get("run_result") or {}
    built = answer.get("compile_result") or {}
    out = (run.get("stdout") or "").strip()
    return {
        "ok": answer.get("status") == "Success" and out == problem.reference(problem.stdin),
        "status": answer.get("status"),
        "compile_s": built.get("execution_time"),
        "run_s": run.get("execution_time"),
        "total_s": total,
    }


def sum_source(language: str, tag: str) -> str:
    """The sum program with the pass named in a comment (see `source`)."""
    comment = {
        "ruby": "#",
        "perl": "#",
        "R": "#",
        "php": "//",
        "lua": "--",
        "sql": "--",
        "racket": ";",
    }.get(language, "//")
    code = SUM_PROGRAMS[language]
    if language == "racket":  # `#lang` must come first
        head, _, body = code.partition("\n")
        return f"{head}\n{comment} {tag}\n{body}\n"
    return f"{comment} {tag}\n{code}\n"


def host_sum_case(language: str, tag: str) -> dict[str, Any]:
    """core/languages.py's compile and run commands on the host, in a scratch directory."""
    lang = languages.language(language)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        (work / lang.source).write_text(sum_source(language, tag))
        started = time.perf_counter()
        compile_s = None
        if lang.compile is not None:
            built = subprocess.run(
                ["bash", "-c", lang.compile], cwd=work, capture_output=True, check=False
            )
            compile_s = time.perf_counter() - started
            if built.returncode != 0:
                return {"ok": False, "total_s": compile_s, "error": built.stderr.decode()[-500:]}
        command = lang.run.replace(languages.JEST_HOME, str(HOST_JEST))
        ran = subprocess.run(
            ["bash", "-c", command],
            cwd=work,
            input=SUM_STDIN.encode(),
            capture_output=True,
            timeout=120,
            check=False,
        )
        total = time.perf_counter() - started
    return {
        "ok": ran.returncode == 0 and _sum_ok(language, ran.stdout.decode()),
        "compile_s": compile_s,
        "total_s": total,
    }


def proctor_sum_case(client: httpx.Client, language: str, tag: str) -> dict[str, Any]:
    body = {
        "code": sum_source(language, tag),
        "language": language,
        "stdin": SUM_STDIN,
        "compile_timeout": 60,
        "run_timeout": 60,
        "memory_limit_MB": 1024,
    }
    started = time.perf_counter()
    answer = client.post("/run_code", json=body).json()
    total = time.perf_counter() - started
    run = answer.get("run_result") or {}
    built = answer.get("compile_result") or {}
    return {
        "ok": answer.get("status") == "Success" and _sum_ok(language, run.get("stdout") or ""),
        "compile_s": built.get("execution_time"),
        "total_s": total,
    }


def _sum_ok(language: str, stdout: str) -> bool:
    # jest prints a test's console.log inside its report
    if language == "jest":
        return SUM_ANSWER in stdout.split() or "15" in stdout
    return stdout.strip() == SUM_ANSWER


def measure(
    fn: Callable[[Any], dict[str, Any]], concurrency: int, items: list[Any] | None = None
) -> tuple[list[dict[str, Any]], float]:
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        cases = list(pool.map(fn, PROBLEMS if items is None else items))
    return cases, time.perf_counter() - started


def row(
    name: str, language: str, concurrency: int, cases: list[dict[str, Any]], wall: float
) -> dict[str, Any]:
    totals = [c["total_s"] for c in cases]
    compiles = [c["compile_s"] for c in cases if c.get("compile_s") is not None]
    stats = summary(totals)
    return {
        "language": language,
        "runner": name,
        "concurrency": concurrency,
        "programs": len(cases),
        "correct": sum(c["ok"] for c in cases),
        "compile_p50_s": summary(compiles)["p50_s"] if compiles else "",
        "p50_s": stats["p50_s"],
        "p95_s": stats["p95_s"],
        "programs_per_s": round(len(cases) / wall, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--languages", default=",".join(["cpp", "java", *SUM_PROGRAMS]))
    parser.add_argument("--cases", action="store_true", help="the 50-case set too")
    args = parser.parse_args()
    chosen = args.languages.split(",")
    levels = [int(c) for c in args.concurrency.split(",")]
    ensure_host_tools(chosen)
    for problem in PROBLEMS:  # the references agree with themselves before anything is timed
        assert problem.reference(problem.stdin), problem.name
    run = f"bench {time.time_ns()}"
    rows: list[dict[str, Any]] = []
    ratios: dict[str, dict[str, float]] = {}
    with (
        service(workers=str(args.workers)) as url,
        httpx.Client(base_url=url, timeout=300) as client,
    ):
        for language in chosen:
            sums = language in SUM_PROGRAMS
            if sums:
                proctor_sum_case(client, language, f"warm {run}")
            else:
                proctor_case(client, language, PROBLEMS[0], f"warm {run}")  # page cache, pools
            for level in levels:
                tag = f"{run} concurrency {level}"
                if sums:
                    tags = [f"{tag} pass {i}" for i in range(REPEATS)]
                    host, host_wall = measure(
                        lambda t, lang=language: host_sum_case(lang, t), level, tags
                    )
                    ours, ours_wall = measure(
                        lambda t, lang=language: proctor_sum_case(client, lang, t), level, tags
                    )
                else:
                    host, host_wall = measure(
                        lambda p, lang=language, t=tag: host_case(lang, p, t), level
                    )
                    ours, ours_wall = measure(
                        lambda p, lang=language, t=tag: proctor_case(client, lang, p, t), level
                    )
                rows.append(row("host", language, level, host, host_wall))
                rows.append(row("proctor", language, level, ours, ours_wall))
                per_program = sorted(
                    o["total_s"] / h["total_s"] for o, h in zip(ours, host, strict=True)
                )
                ratios.setdefault(language, {})[str(level)] = round(
                    per_program[len(per_program) // 2], 2
                )
        judged = contest.measure(client, run) if args.cases else []
    columns = [
        "language",
        "runner",
        "concurrency",
        "programs",
        "correct",
        "compile_p50_s",
        "p50_s",
        "p95_s",
        "programs_per_s",
    ]
    print(table(rows, columns))
    print()
    print("Proctor / host latency, p50 over programs:")
    for language, by_level in ratios.items():
        shown = ", ".join(f"concurrency {level}: {ratio}x" for level, ratio in by_level.items())
        print(f"  {language}: {shown}")
    if judged:
        print("\nCode-Contests-shaped: one program x 50 stdin cases (median of 3)")
        print(
            table(
                judged,
                ["language", "runner", "cases", "accepted", "compile_s", "cases_s", "total_s"],
            )
        )
    path = write(
        "languages",
        {
            "machine": machine(),
            "workers": args.workers,
            "rows": rows,
            "ratios": ratios,
            "cases": judged,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
