# D: ldmd2 (LDC with dmd's flags) builds with unit tests; they run, then main reads stdin.
set -eu
printf 'import std.stdio;\nunittest { assert(1 + 1 == 2); }\nvoid main(){long a,b;readf(" %%d %%d",&a,&b);writeln(a+b);}\n' >main.d
ldmd2 -unittest -of=test main.d
./test </dev/null >/dev/null
printf 'import std.stdio;\nvoid main(){long a,b;readf(" %%d %%d",&a,&b);writeln(a+b);}\n' >main.d
ldmd2 -unittest -of=test main.d
[ "$(echo 2 3 | ./test)" = 5 ]
