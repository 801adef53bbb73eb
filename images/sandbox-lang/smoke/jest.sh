# jest: a TypeScript test, run as core/languages.py runs it (the runtime linked in).
set -eu
home=/opt/proctor/jest
printf 'import { expect, test } from "@jest/globals";\nimport _ from "lodash";\ntest("adds", () => { expect(_.sum([2, 3])).toBe(5); });\n' >main.test.ts
ln -sfn "$home/node_modules" node_modules
cp "$home/package.json" "$home/babel.config.js" .
FORCE_COLOR=0 node node_modules/jest/bin/jest.js --ci
