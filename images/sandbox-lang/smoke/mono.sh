# C# on Mono: mcs compiles, mono runs a program that reads stdin.
set -eu
printf 'using System;\npublic class Program { public static void Main() { var p = Console.ReadLine().Split(); Console.WriteLine(long.Parse(p[0]) + long.Parse(p[1])); } }\n' >Program.cs
mcs -d:DEBUG -nologo -out:main.exe Program.cs
[ "$(echo 2 3 | mono main.exe)" = 5 ]
