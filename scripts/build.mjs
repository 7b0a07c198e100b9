// npm run build: one source, two builds by tsc, each with its own declarations.
//   dist/      ES modules (the package is "type": "module")       ← import
//   dist/cjs/  CommonJS, marked by dist/cjs/package.json          ← require
// No bundler: the output is tsc's, file for file, so both builds and their .d.ts mirror src/;
// two exceptions: src/*.cjs (CommonJS in both builds, with their .d.cts) are copied as they are,
// and dist/cjs/index.{js,d.ts} make `require('fastify-write-buffer')` return the plugin function
// itself, as Fastify plugins do (scripts/cjs-entry.mjs).
import { copyFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { execFile } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { writeCjsEntry } from './cjs-entry.mjs'

const root = fileURLToPath(new URL('..', import.meta.url))
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')

rmSync(new URL('../dist', import.meta.url), { recursive: true, force: true })
// the two compilations are independent: run them side by side
const results = await Promise.allSettled(['tsconfig.build.json', 'tsconfig.build.cjs.json'].map(config =>
  promisify(execFile)(process.execPath, [tsc, '-p', config], { cwd: root })))
let failed = false
for (const r of results) {
  if (r.status === 'rejected') {
    failed = true
    process.stderr.write(`${r.reason.stdout ?? ''}${r.reason.stderr ?? ''}${r.reason.stdout || r.reason.stderr ? '' : r.reason.message}\n`)
  }
}
if (failed) process.exit(1)
writeFileSync(new URL('../dist/cjs/package.json', import.meta.url), '{ "type": "commonjs" }\n')
for (const file of readdirSync(new URL('../src', import.meta.url)).filter(f => /\.(d\.cts|cjs)$/.test(f))) {
  for (const out of ['../dist/', '../dist/cjs/']) copyFileSync(new URL(`../src/${file}`, import.meta.url), new URL(out + file, import.meta.url))
}
writeCjsEntry(fileURLToPath(new URL('../dist/cjs', import.meta.url)))
