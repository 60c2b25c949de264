// Runs the wasm32-wasip1 build of this crate in Node.js's V8 (node:wasi). The filter's proxy-wasm
// imports (module "env") are never called by `gate::on_body`; they are satisfied with functions
// that return 0. Usage: node run.mjs MODULE.wasm POLICY BODY [ITERATIONS].
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { WASI } from 'node:wasi';

const [module, ...given] = process.argv.slice(2);
// Files are passed as absolute paths under the one preopened directory, /.
const args = given.map((a) => (existsSync(a) ? resolve(a) : a));
const wasi = new WASI({ version: 'preview1', args: ['mcpf-bench-v8-decision', ...args], preopens: { '/': '/' } });
const compiled = await WebAssembly.compile(await readFile(module));
const imports = wasi.getImportObject();
imports.env = {};
for (const i of WebAssembly.Module.imports(compiled)) {
  if (i.module === 'env') imports.env[i.name] = () => 0;
}
const instance = await WebAssembly.instantiate(compiled, imports);
// The filter's crate is a reactor (it exports _initialize for proxy-wasm); this program is a
// command: start it through _start only.
const exports = Object.assign({}, instance.exports);
delete exports._initialize;
process.exitCode = wasi.start({ exports });
