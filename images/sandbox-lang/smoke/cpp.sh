# C and C++: compile with the flags core/languages.py uses, run, read stdin.
set -eu
printf '#include <bits/stdc++.h>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a+b<<"\\n";}\n' >main.cpp
g++ -std=c++17 -O2 -pipe main.cpp -o main -lpthread
[ "$(echo 2 3 | ./main)" = 5 ]
printf '#include <stdio.h>\n#include <math.h>\nint main(void){printf("%%.0f\\n", sqrt(49.0));return 0;}\n' >main.c
gcc -std=c11 -O2 -pipe main.c -o main -lm
[ "$(./main)" = 7 ]
# testlib.h (code-contest checkers): a checker compiles and accepts
printf '#include "testlib.h"\nint main(int c,char*v[]){registerTestlibCmd(c,v);ouf.readInt();quitf(_ok,"ok");}\n' >checker.cpp
g++ -std=c++17 -O2 -pipe checker.cpp -o checker
echo 1 >in && echo 1 >out && echo 1 >ans && ./checker in out ans 2>/dev/null
