# JavaScript and TypeScript: node runs a program; tsc emits it from TypeScript.
set -eu
printf 'const l=require("fs").readFileSync(0,"utf8").trim().split(/\\s+/).map(Number);console.log(l[0]+l[1]);\n' >main.js
[ "$(echo 2 3 | node main.js)" = 5 ]
rm main.js
printf 'const n: number = 5;\nconsole.log(n);\n' >main.ts
tsc --target es2020 --module commonjs --skipLibCheck --pretty false main.ts
[ "$(node main.js)" = 5 ]
