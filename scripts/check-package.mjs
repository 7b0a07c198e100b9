// The package as users get it (`bash .ci/run` runs this before the tests; about 15 s).
// Packs it with `npm pack` (which builds it), then, in scratch projects outside the checkout
// that get the tarball's files and nothing else of the checkout:
//   1. CommonJS: `require`s the package (the plugin function itself, with `.default` and the
//      named exports) and its `/core` entry and registers the plugin on a Fastify instance (a
//      MongoClient that never connects: `connectTimeoutMs: 0`);
//   2. ESM: `import`s both and registers the plugin from a `url`; an error of the CommonJS copy
//      is `instanceof` the ESM copy's WriteBufferError; in both, `@opentelemetry/api` (linked
//      here) is loaded when the buffer is built, synchronously;
//   3. TypeScript, strict: every ```ts block of README.md compiles on its own; a .cts file sees
//      `require('fastify-write-buffer')` as the plugin with its named exports; an ESM .ts and a
//      .cts file using the plugin compile together (both builds' declarations in one program,
//      one WriteBuffer type; nodenext, node16 and bundler);
//   4. TypeScript without `fastify` installed: `fastify-write-buffer/core` compiles (ESM and
//      CommonJS, declarations checked: skipLibCheck off for the package), and runs; the root
//      entry, which needs Fastify's types, does not compile there (so the check can fail);
//   5. publint (--strict) and @arethetypeswrong/cli on the tarball: no problems.
// No network: the scratch projects link the tarball's dependencies and the peers from this
// checkout's node_modules (as `npm ci` left them) instead of installing them.
//
//   node scripts/check-package.mjs [--keep] [--tarball FILE]
//     --keep: leave the scratch folder for a look; --tarball: check FILE (an `npm pack` of this
//     checkout) instead of packing (scripts/node-matrix.mjs packs once for every Node version)
import { execFile } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import ts from 'typescript'
import { checkReadme, format, typecheck, USER_OPTIONS } from './check-readme.mjs'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const run = promisify(execFile)
const keep = process.argv.includes('--keep')
const given = process.argv.includes('--tarball') ? resolve(process.argv[process.argv.indexOf('--tarball') + 1] ?? '') : undefined
const started = performance.now()
const scratch = mkdtempSync(join(tmpdir(), 'fastify-write-buffer-pack-'))
let passed = 0

async function step (name, fn) {
  const t0 = performance.now()
  try {
    const detail = await fn()
    passed++
    console.log(`ok   ${name} (${Math.round(performance.now() - t0)} ms)${detail ? `: ${detail}` : ''}`)
  } catch (err) {
    console.log(`FAIL ${name}`)
    console.error(`${err.stdout ?? ''}${err.stderr ?? ''}${err.stdout || err.stderr ? '' : err.stack}`)
    console.error(`scratch folder kept: ${scratch}`)
    process.exit(1)
  }
}

/** A command's output; rejects with it when the command exits non-zero. */
function sh (file, args, options = {}) {
  return run(file, args, { maxBuffer: 64 * 1024 * 1024, shell: process.platform === 'win32' && file === 'npm', ...options })
}

/** Runs a package's bin from this checkout's node_modules with node. */
function bin (pkg, name, args, options) {
  const dir = join(root, 'node_modules', pkg)
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  const rel = typeof manifest.bin === 'string' ? manifest.bin : manifest.bin[name]
  return sh(process.execPath, [join(dir, rel), ...args], options)
}

/** Links `name` in `dir`/node_modules to this checkout's copy (as `npm ci` installed it). */
function link (dir, name) {
  const target = join(root, 'node_modules', name)
  if (!existsSync(target)) throw new Error(`${name} is not in ${join(root, 'node_modules')}: run npm ci first`)
  const at = join(dir, 'node_modules', name)
  mkdirSync(dirname(at), { recursive: true })
  symlinkSync(target, at, process.platform === 'win32' ? 'junction' : 'dir')
}

/**
 * A scratch project: the unpacked tarball as node_modules/fastify-write-buffer (a copy of its
 * own, so nothing resolves through the checkout), its declared dependencies and `extra` linked.
 */
function project (name, unpacked, extra) {
  const dir = join(scratch, name)
  mkdirSync(join(dir, 'node_modules'), { recursive: true })
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `check-${name}`, private: true, type: 'module' }, null, 2))
  cpSync(unpacked, join(dir, 'node_modules', 'fastify-write-buffer'), { recursive: true })
  const manifest = JSON.parse(readFileSync(join(unpacked, 'package.json'), 'utf8'))
  for (const dep of [...Object.keys(manifest.dependencies ?? {}), ...extra]) link(dir, dep)
  return dir
}

/**
 * A typecheck's diagnostics in our files and the package's declarations (skipLibCheck off
 * checks those); other packages' declaration files are not this check's business.
 */
const ours = ({ diagnostics }) => format(diagnostics.filter(d =>
  d.file === undefined || !/node_modules[\\/](?!fastify-write-buffer[\\/])/.test(d.file.fileName)))

let tarball, unpacked, app, coreOnly

await step(given === undefined ? 'npm pack (prepack builds dist/)' : `the tarball given (${given})`, async () => {
  if (given === undefined) await sh('npm', ['pack', '--pack-destination', scratch, '--loglevel', 'warn'], { cwd: root })
  else cpSync(given, join(scratch, basename(given)))
  const name = readdirSync(scratch).find(f => f.endsWith('.tgz'))
  if (name === undefined) throw new Error('npm pack wrote no tarball')
  tarball = join(scratch, name)
  await sh('tar', ['-xzf', name, '-C', scratch], { cwd: scratch })
  unpacked = join(scratch, 'unpacked')
  renameSync(join(scratch, 'package'), unpacked)
  const files = (dir) => readdirSync(dir, { recursive: true, withFileTypes: true }).filter(d => d.isFile()).length
  return `${name}, ${files(unpacked)} files`
})

await step('scratch projects', async () => {
  app = project('app', unpacked, ['fastify', 'mongodb', '@types/node', '@opentelemetry/api'])
  coreOnly = project('core-only', unpacked, ['mongodb', '@types/node'])
  // the point of the second project: Fastify must be out of reach from it
  const resolveThere = createRequire(join(coreOnly, 'index.js')).resolve
  let found = null
  try { found = resolveThere('fastify') } catch {}
  if (found !== null) throw new Error(`fastify resolves from ${coreOnly}: ${found}`)
  return scratch
})

await step('CommonJS: require() + register the plugin', async () => {
  writeFileSync(join(app, 'require.cjs'), `'use strict'
const assert = require('node:assert/strict')
const { join } = require('node:path')
const Fastify = require('fastify')
const { MongoClient } = require('mongodb')
const writeBuffer = require('fastify-write-buffer')
const core = require('fastify-write-buffer/core')

assert.ok(require.resolve('fastify-write-buffer').endsWith(join('dist', 'cjs', 'index.js')))
// as Fastify plugins do: the module is the plugin function, with .default and named exports on it
assert.equal(typeof writeBuffer, 'function', "require('fastify-write-buffer') is the plugin function")
assert.equal(writeBuffer.default, writeBuffer)
assert.equal(writeBuffer.fastifyWriteBuffer, writeBuffer)
assert.equal(writeBuffer.writeBufferPlugin, writeBuffer)
assert.equal(core.WriteBuffer, writeBuffer.WriteBuffer, 'one WriteBuffer class per build')
assert.equal(core.writeBufferPlugin, undefined)

// @opentelemetry/api is installed here: loaded synchronously, when the buffer is built
let asked = 0
const provider = { getTracer: (...args) => { asked++; return require('@opentelemetry/api').trace.getTracer(...args) } }
new writeBuffer.WriteBuffer(new MongoClient('mongodb://127.0.0.1:9/').db('check'), { tracerProvider: provider })
assert.equal(asked, 1, 'the tracer was asked for when the buffer was built')

async function main () {
  // never connected: connectTimeoutMs 0 skips the start-up ping, and nothing is written
  const client = new MongoClient('mongodb://127.0.0.1:9/')
  const app = Fastify()
  await app.register(writeBuffer.writeBufferPlugin, { db: client.db('check'), connectTimeoutMs: 0 })
  app.get('/', async (request) => ({
    buffer: app.writeBuffer instanceof core.WriteBuffer,
    signal: request.writeSignal instanceof AbortSignal,
  }))
  assert.deepEqual((await app.inject('/')).json(), { buffer: true, signal: true })
  await app.close()
  await client.close()

  // the CommonJS idiom: register the module itself
  const other = Fastify()
  await other.register(require('fastify-write-buffer'), { url: 'mongodb://127.0.0.1:9/check', connectTimeoutMs: 0 })
  assert.ok(other.writeBuffer instanceof writeBuffer.WriteBuffer)
  await other.close()
}
main().then(() => console.log('require ok'), (err) => { console.error(err); process.exit(1) })
`)
  await sh(process.execPath, ['require.cjs'], { cwd: app })
})

await step('ESM: import + register the plugin', async () => {
  writeFileSync(join(app, 'import.mjs'), `import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import Fastify from 'fastify'
import { createRequire } from 'node:module'
import writeBuffer, { WriteBuffer, WriteBufferError, fastifyWriteBuffer, writeBufferPlugin } from 'fastify-write-buffer'
import * as core from 'fastify-write-buffer/core'

assert.ok(fileURLToPath(import.meta.resolve('fastify-write-buffer')).endsWith('dist/index.js'.replaceAll('/', process.platform === 'win32' ? '\\\\' : '/')))
assert.equal(writeBuffer, writeBufferPlugin)
assert.equal(fastifyWriteBuffer, writeBufferPlugin)
// the error family's check holds across the two copies (CommonJS and ESM) of the package
const cjs = createRequire(import.meta.url)('fastify-write-buffer')
assert.notEqual(cjs.WriteBufferError, WriteBufferError)
assert.ok(new cjs.InvalidWriteError('x') instanceof WriteBufferError)
assert.ok(new cjs.WriteRejectedError(11000, 'dup', 1) instanceof WriteBufferError)
assert.ok(new core.InvalidOptionError('x') instanceof cjs.WriteBufferError)
assert.ok(!(new TypeError('x') instanceof WriteBufferError))
assert.equal(core.WriteBuffer, WriteBuffer, 'one WriteBuffer class per build')
assert.ok(!('default' in core) && !('writeBufferPlugin' in core))

// @opentelemetry/api is installed here: loaded synchronously, when the buffer is built
const { trace } = await import('@opentelemetry/api')
let asked = 0
const { MongoClient } = await import('mongodb')
new WriteBuffer(new MongoClient('mongodb://127.0.0.1:9/').db('check'), { tracerProvider: { getTracer: (...args) => { asked++; return trace.getTracer(...args) } } })
assert.equal(asked, 1, 'the tracer was asked for when the buffer was built')

const app = Fastify()
await app.register(writeBuffer, { url: 'mongodb://127.0.0.1:9/check', connectTimeoutMs: 0 })
assert.ok(app.writeBuffer instanceof WriteBuffer)
await app.close()
console.log('import ok')
`)
  await sh(process.execPath, ['import.mjs'], { cwd: app })
})

await step('TypeScript strict: README ts blocks', async () => {
  const n = checkReadme({ readme: join(unpacked, 'README.md'), dir: app })
  return `${n} blocks`
})

await step('TypeScript strict, CommonJS: require() types', async () => {
  // what a .cts file (or a "module": "commonjs" project) sees: the plugin itself, with .default,
  // .fastifyWriteBuffer and every named export, values and types
  writeFileSync(join(app, 'require-types.cts'), `import Fastify = require('fastify')
import fastifyWriteBuffer = require('fastify-write-buffer')
import { WriteBufferError, WriteRejectedError, type WriteBufferOptions } from 'fastify-write-buffer'

const options: WriteBufferOptions = { maxBatchSize: 100 }
export async function main (): Promise<void> {
  const app = Fastify()
  await app.register(fastifyWriteBuffer, { url: 'mongodb://127.0.0.1:9/check', connectTimeoutMs: 0, ...options })
  await app.register(fastifyWriteBuffer.default, { url: 'mongodb://127.0.0.1:9/check', connectTimeoutMs: 0 })
  await app.register(fastifyWriteBuffer.fastifyWriteBuffer, { url: 'mongodb://127.0.0.1:9/check', connectTimeoutMs: 0 })
  const wb: fastifyWriteBuffer.WriteBuffer = app.writeBuffer
  try {
    await wb.collection<{ name: string }>('users').insertOne({ name: 'ann' })
  } catch (e) {
    if (e instanceof WriteRejectedError) { const code: number = e.code; console.log(code) }
    if (e instanceof WriteBufferError) console.log(e.code, e.outcome)
  }
}
`)
  const problems = ours(typecheck([join(app, 'require-types.cts')], { ...USER_OPTIONS, skipLibCheck: false }))
  if (problems !== '') throw new Error(problems)
  return 'import x = require(): callable, registered, .default, named types'
})

await step('TypeScript strict: an ESM .ts and a CommonJS .cts in one program', async () => {
  // a project with both (say, a .cts config next to ESM sources) loads dist/ and dist/cjs/
  // declarations at once: Fastify's augmentation, `writeBuffer` on FastifyInstance, must be
  // declared with one WriteBuffer type (TS2717 otherwise), and the two builds' WriteBuffer types
  // must be one (scripts/build.mjs); under nodenext, node16 (where CommonJS declarations cannot
  // re-export ES ones) and bundler
  const uses = `import Fastify from 'fastify'
export async function main (): Promise<void> {
  const app = Fastify()
  await app.register(plugin, { url: 'mongodb://127.0.0.1:9/check', connectTimeoutMs: 0 })
  await app.writeBuffer.collection<{ name: string }>('users').insertOne({ name: 'ann' })
  app.get('/', async (request) => ({ aborted: request.writeSignal.aborted }))
}
`
  writeFileSync(join(app, 'both-esm.ts'), `import plugin, { type WriteBuffer } from 'fastify-write-buffer'
import type { Cjs } from './both-cjs.cjs'
export type Esm = WriteBuffer
export const same: [Esm, Cjs] = [null as unknown as Cjs, null as unknown as Esm]
${uses}`)
  writeFileSync(join(app, 'both-cjs.cts'), `import plugin = require('fastify-write-buffer')\nexport type Cjs = plugin.WriteBuffer\n${uses}`)
  const modes = {
    nodenext: {},
    node16: { module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16 },
    bundler: { module: ts.ModuleKind.Preserve, moduleResolution: ts.ModuleResolutionKind.Bundler },
  }
  for (const [mode, options] of Object.entries(modes)) {
    const both = typecheck([join(app, 'both-esm.ts'), join(app, 'both-cjs.cts')], { ...USER_OPTIONS, skipLibCheck: false, ...options })
    const files = both.program.getSourceFiles().map(f => f.fileName)
    if (!files.some(f => /fastify-write-buffer[\\/]dist[\\/]cjs[\\/]index\.d\.ts$/.test(f)) ||
        !files.some(f => /fastify-write-buffer[\\/]dist[\\/]index\.d\.ts$/.test(f))) {
      throw new Error(`${mode}: the program did not load both dist/index.d.ts and dist/cjs/index.d.ts`)
    }
    if (ours(both) !== '') throw new Error(`${mode}:\n${ours(both)}`)
  }
  return `dist/ and dist/cjs/ declarations together, one WriteBuffer type (${Object.keys(modes).join(', ')})`
})

await step('TypeScript without fastify: fastify-write-buffer/core', async () => {
  const uses = (what) => `import { MongoClient, type ObjectId } from 'mongodb'
import { WriteBuffer, BATCH_CHANNEL, type InsertResult, type UpdateResult, type WriteBufferOptions } from '${what}'

interface User { name: string, logins: number }
const options: WriteBufferOptions = { maxBatchSize: 500, cache: { ttlMs: 1_000 } }
const wb = new WriteBuffer(new MongoClient('mongodb://127.0.0.1:9/').db('check'), options)
const users = wb.collection<User>('users')
export const inserted: Promise<InsertResult<ObjectId>> = users.insertOne({ name: 'ann', logins: 0 })
export const updated: Promise<UpdateResult<ObjectId>> = users.updateOne({ name: 'ann' }, { $inc: { logins: 1 } })
export const channel: string = BATCH_CHANNEL
// the buffer's own hooks are not a user's API (@internal, stripped from the declarations)
// @ts-expect-error noteWrite is internal
export const noteWrite = wb.cache?.noteWrite
// @ts-expect-error fenced is internal
export const fenced = wb.cache?.fenced
export const cacheStats = wb.cache?.stats()
`
  writeFileSync(join(coreOnly, 'esm.ts'), uses('fastify-write-buffer/core'))
  writeFileSync(join(coreOnly, 'cjs.cts'), uses('fastify-write-buffer/core'))
  writeFileSync(join(coreOnly, 'root.ts'), uses('fastify-write-buffer'))
  // skipLibCheck off: the package's own declarations are checked too (TS2307 for a missing
  // 'fastify' would show there); other packages' declaration files are not this check's business
  const options = { ...USER_OPTIONS, skipLibCheck: false }
  const core = typecheck([join(coreOnly, 'esm.ts'), join(coreOnly, 'cjs.cts')], options)
  const files = core.program.getSourceFiles().map(f => f.fileName)
  if (!files.some(f => /fastify-write-buffer[\\/]dist[\\/]cjs[\\/]core\.d\.ts$/.test(f)) ||
      !files.some(f => /fastify-write-buffer[\\/]dist[\\/]core\.d\.ts$/.test(f))) {
    throw new Error('the program did not load both dist/core.d.ts and dist/cjs/core.d.ts')
  }
  if (ours(core) !== '') throw new Error(ours(core))
  // the control: the root entry needs Fastify's types, so here it must fail, on 'fastify'
  const rootEntry = typecheck([join(coreOnly, 'root.ts')], options)
  if (!/Cannot find module 'fastify'/.test(rootEntry.text)) {
    throw new Error(`the root entry compiled without fastify installed: this check cannot see a missing 'fastify'\n${rootEntry.text}`)
  }
  // and at run time, where @opentelemetry/api is not installed either: a buffer is built, untraced
  const build = `const provider = { getTracer () { throw new Error('traced without @opentelemetry/api') } }
new WriteBuffer(new MongoClient('mongodb://127.0.0.1:9/').db('check'), { tracerProvider: provider })
`
  writeFileSync(join(coreOnly, 'run.cjs'), `const { WriteBuffer } = require('fastify-write-buffer/core')\nconst { MongoClient } = require('mongodb')\n${build}`)
  writeFileSync(join(coreOnly, 'run.mjs'), `import { WriteBuffer } from 'fastify-write-buffer/core'\nimport { MongoClient } from 'mongodb'\n${build}`)
  await sh(process.execPath, ['run.cjs'], { cwd: coreOnly })
  await sh(process.execPath, ['run.mjs'], { cwd: coreOnly })
  return 'ESM and CommonJS compile and run; the root entry needs fastify (as it should)'
})

await step('publint --strict', async () => {
  const { stdout } = await bin('publint', 'publint', ['run', tarball, '--strict'], { cwd: scratch })
  if (!/All good!/.test(stdout)) throw Object.assign(new Error('publint reported something'), { stdout })
  return 'All good!'
})

await step('attw (@arethetypeswrong/cli)', async () => {
  const { stdout } = await bin('@arethetypeswrong/cli', 'attw', [tarball, '--format', 'table-flipped'], { cwd: scratch })
  if (!/No problems found/.test(stdout)) throw Object.assign(new Error('attw reported something'), { stdout })
  return 'No problems found (node10, node16 CJS, node16 ESM, bundler; ".", "./core")'
})

if (!keep) rmSync(scratch, { recursive: true, force: true })
console.log(`package check: all ${passed} steps ok (${((performance.now() - started) / 1000).toFixed(1)} s)`)
