# Ruby, PHP, Perl (Test::Deep, Data::Compare), Lua (luaunit), SQLite and Icarus Verilog: each
# runs a stdin/stdout program with the commands core/languages.py uses.
set -eu
printf 'a, b = gets.split.map(&:to_i)\nputs a + b\n' >main.rb
[ "$(echo 2 3 | ruby main.rb)" = 5 ]
printf '<?php\nfscanf(STDIN, "%%d %%d", $a, $b);\necho $a + $b, "\\n";\n' >main.php
[ "$(echo 2 3 | php -f main.php)" = 5 ]
printf 'use Test::Deep; use Data::Compare;\nmy ($a, $b) = split " ", <STDIN>;\nprint $a + $b, "\\n";\n' >main.pl
[ "$(echo 2 3 | perl main.pl)" = 5 ]
printf 'local lu = require("luaunit")\nlocal a, b = io.read("n", "n")\nprint(math.tointeger(a + b))\n' >main.lua
[ "$(echo 2 3 | lua main.lua)" = 5 ]
printf 'CREATE TABLE t(a INT, b INT);\n.separator " "\n.import /dev/stdin t\nSELECT a + b FROM t;\n' >main.sql
[ "$(echo 2 3 | sqlite3 -bail -batch :memory: '.read main.sql')" = 5 ]
printf 'module tb; initial begin $display("%%0d", 2 + 3); $finish; end endmodule\n' >main.sv
iverilog -Wall -Winfloop -Wno-timescale -g2012 -s tb -o test.vvp main.sv
[ "$(vvp -n test.vvp)" = 5 ]
