# JavaScript and TypeScript: node runs a program; tsx runs TypeScript as SandboxFusion does
# (an ES default import of a CommonJS module, lodash from NODE_PATH); tsc still emits it.
set -eu
printf 'const l=require("fs").readFileSync(0,"utf8").trim().split(/\\s+/).map(Number);console.log(l[0]+l[1]);\n' >main.js
[ "$(echo 2 3 | node main.js)" = 5 ]
printf 'const _ = require("lodash");\nconsole.log(_.sum([2, 3]));\n' >main.js
[ "$(node main.js)" = 5 ]
rm main.js
printf 'import assert from "assert";\nimport _ from "lodash";\nconst n: number = _.sum([2, 3]);\nassert.strictEqual(n, 5);\nconsole.log(n);\n' >main.ts
[ "$(tsx main.ts)" = 5 ]
# the way core/languages.py runs it: tsx's loader in node itself
[ "$(node --import file:///usr/local/lib/node_modules/tsx/dist/loader.mjs main.ts)" = 5 ]
tsc --target es2020 --module commonjs --esModuleInterop --skipLibCheck --pretty false main.ts >/dev/null || true
[ "$(node main.js)" = 5 ]
