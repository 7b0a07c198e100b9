// npm run build: one source, two builds, each with its declarations.
//   dist/      ES modules (the package is "type": "module")       ← import
//   dist/cjs/  CommonJS, marked by dist/cjs/package.json          ← require
// No bundler: the output mirrors src/ file for file. tsc compiles the ES build (it type-checks
// src and writes the .js and .d.ts); the CommonJS build is the same sources transpiled file by
// file (ts.transpileModule with tsconfig.build.cjs.json's options: the text `tsc -p
// tsconfig.build.cjs.json` writes, since src is isolated-module safe, which tsconfig.json
// enforces), with the ES build's declarations (the same text): one type-check instead of two.
// Two exceptions: src/*.cjs (CommonJS in both builds, with their .d.cts) are copied as they are,
// and dist/cjs/index.{js,d.ts} make `require('fastify-write-buffer')` return the plugin function
// itself, as Fastify plugins do (scripts/cjs-entry.mjs).
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { execFile } from 'node:child_process'
import { createRequire } from 'node:module'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { writeCjsEntry } from './cjs-entry.mjs'

const root = fileURLToPath(new URL('..', import.meta.url))
const require = createRequire(import.meta.url)
const tsc = require.resolve('typescript/bin/tsc')
const ts = require('typescript')
const dist = join(root, 'dist')
const cjs = join(dist, 'cjs')

rmSync(dist, { recursive: true, force: true })
try {
  await promisify(execFile)(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root })
} catch (err) {
  process.stderr.write(`${err.stdout ?? ''}${err.stderr ?? ''}${err.stdout || err.stderr ? '' : err.message}\n`)
  process.exit(1)
}

const config = ts.getParsedCommandLineOfConfigFile(join(root, 'tsconfig.build.cjs.json'), {}, {
  ...ts.sys,
  onUnRecoverableConfigFileDiagnostic: d => { throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n')) },
})
const src = join(root, 'src')
for (const file of config.fileNames) {
  if (!file.endsWith('.ts') || file.endsWith('.d.ts')) continue
  const path = relative(src, file).replace(/\.ts$/, '')
  const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), { compilerOptions: config.options, fileName: file })
  mkdirSync(dirname(join(cjs, path)), { recursive: true })
  writeFileSync(join(cjs, `${path}.js`), outputText)
  copyFileSync(join(dist, `${path}.d.ts`), join(cjs, `${path}.d.ts`))
}
writeFileSync(join(cjs, 'package.json'), '{ "type": "commonjs" }\n')
for (const file of readdirSync(src).filter(f => /\.(d\.cts|cjs)$/.test(f))) {
  for (const out of [dist, cjs]) copyFileSync(join(src, file), join(out, file))
}
writeCjsEntry(cjs)
