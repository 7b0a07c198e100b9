// Typechecks every ```ts block of README.md on its own, under `strict`, against the built
// package: each block must compile by itself (its own imports and setup); in this checkout the
// ```ts blocks of docs/*.md too (examples moved there from the README). Checks the README's
// options table (under "## API") and its "`name` (default …)" mentions against the built
// package's DEFAULTS (src/options.ts), the one place a default is declared.
//
//   node scripts/check-readme.mjs              against this checkout's dist/ (run `npm run build` first)
//   node scripts/check-readme.mjs --dir DIR    against the package installed in DIR/node_modules
//                                              (scripts/check-package.mjs: the packed tarball)
//
// Each block is written to DIR/readme-<line>.ts and compiled as its own program (a file
// importing 'fastify-write-buffer' resolves it through the package's exports map, as a user's
// would). The programs share one compiler host, so lib, @types/node, mongodb and fastify
// declarations are parsed once.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { basename, dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import ts from 'typescript'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/** What a user's strict ESM project compiles with (tsc --init's defaults, `module: nodenext`). */
export const USER_OPTIONS = {
  strict: true,
  target: ts.ScriptTarget.ES2022,
  lib: ['lib.es2022.d.ts'],
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  types: ['node'],
  esModuleInterop: true,
  skipLibCheck: true,
  noEmit: true,
}

/** A compiler host whose parsed source files are kept across programs. */
export function cachingHost (options) {
  const host = ts.createCompilerHost(options)
  const cache = new Map()
  const getSourceFile = host.getSourceFile.bind(host)
  host.getSourceFile = (fileName, languageVersion, onError, shouldCreate) => {
    const key = `${fileName}\0${JSON.stringify(languageVersion)}`
    let file = cache.get(key)
    if (file === undefined) {
      file = getSourceFile(fileName, languageVersion, onError, shouldCreate)
      if (file !== undefined) cache.set(key, file)
    }
    return file
  }
  return host
}

/** Diagnostics as tsc prints them ('' for none). */
export function format (diagnostics) {
  return ts.formatDiagnostics(diagnostics, {
    getCanonicalFileName: f => f,
    getCurrentDirectory: () => process.cwd(),
    getNewLine: () => '\n',
  })
}

/** Compiles `files` as one program: `{ program, diagnostics, text }` (text '' when none). */
export function typecheck (files, options = USER_OPTIONS, host = cachingHost(options)) {
  const program = ts.createProgram({ rootNames: files, options, host })
  const diagnostics = ts.getPreEmitDiagnostics(program)
  return { program, diagnostics, text: format(diagnostics) }
}

/** The ```ts blocks of a Markdown file: `{ line, code }`, line = the first line of code (1-based). */
export function tsBlocks (markdown) {
  const blocks = []
  const lines = markdown.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*(ts|typescript)\s*$/.exec(lines[i])
    if (open === null) continue
    const fence = open[2]
    const body = []
    let j = i + 1
    while (j < lines.length && !lines[j].trim().startsWith(fence)) body.push(lines[j++])
    blocks.push({ line: i + 2, code: body.join('\n') + '\n' })
    i = j
  }
  return blocks
}

/** The rows of the `| option | default | meaning |` table under "## API": option name → its row's cells and text. */
export function optionsTable (markdown) {
  const lines = markdown.split('\n')
  const api = lines.findIndex(l => l.trim() === '## API')
  const header = lines.findIndex((l, i) => i > api && /^\|\s*option\s*\|\s*default\s*\|/.test(l))
  if (api === -1 || header === -1) return undefined
  const rows = new Map()
  for (let i = header + 2; i < lines.length && lines[i].startsWith('|'); i++) {
    const cells = lines[i].split('|').slice(1, -1).map(c => c.trim())
    const name = /^`([^`]+)`$/.exec(cells[0] ?? '')?.[1]
    if (name !== undefined) rows.set(name, { defaultCell: cells[1] ?? '', text: lines[i], line: i + 1 })
  }
  return rows
}

const UNITS = { KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 }

/**
 * The value a README default says, from the start of `text`: `'wait'`, true, 1000, 100,000,
 * 8 MiB, `0 (adaptive)`; `min(ttlMs, 1000)` says 1000 (a cap on another option: DEFAULTS holds
 * the cap). undefined when it says none.
 */
export function readDefault (text) {
  const t = text.replace(/`/g, '').trim()
  const min = /^min\(\s*\w+\s*,\s*([^)]+)\)/.exec(t)
  if (min !== null) return readDefault(min[1])
  const string = /^'([^']*)'/.exec(t)
  if (string !== null) return string[1]
  const bool = /^(true|false)\b/.exec(t)
  if (bool !== null) return bool[1] === 'true'
  const number = /^(\d[\d,_]*(?:\.\d+)?)(?:\s*(KiB|MiB|GiB)\b)?/.exec(t)
  if (number !== null) return Number(number[1].replace(/[,_]/g, '')) * (UNITS[number[2]] ?? 1)
  return undefined
}

/** `[path, value]` for every default, `retry.maxAttempts` for a group's. */
function leaves (defaults, prefix = '') {
  return Object.entries(defaults).flatMap(([key, value]) =>
    typeof value === 'object' && value !== null ? leaves(value, `${prefix}${key}.`) : [[`${prefix}${key}`, value]])
}

/**
 * What in `markdown` disagrees with `DEFAULTS` (the built src/options.ts) and the option names:
 * a top-level option's default is its row's default cell; a group's (`retry.maxAttempts`,
 * `cache.bus.channel`) is the `name: value` in its group's row; every "`name` (default value"
 * elsewhere must agree too. Every option has a row (a deprecated alias: a mention in the table),
 * every row is an option. Returns `{ failures, checked }`.
 */
export function checkOptionDefaults (markdown, { DEFAULTS, WRITE_BUFFER_OPTION_NAMES }) {
  const failures = []
  const rows = optionsTable(markdown)
  if (rows === undefined) return { failures: ['no `| option | default | meaning |` table under "## API"'], checked: 0 }
  const table = [...rows.values()].map(r => r.text).join('\n')
  for (const name of WRITE_BUFFER_OPTION_NAMES) {
    if (!rows.has(name) && !table.includes(`\`${name}\``)) failures.push(`option \`${name}\` is not in the options table`)
  }
  for (const name of rows.keys()) {
    if (!WRITE_BUFFER_OPTION_NAMES.includes(name)) failures.push(`the options table has a row for \`${name}\`, which is no option`)
  }
  const show = v => JSON.stringify(v)
  let checked = 0
  for (const [path, value] of leaves(DEFAULTS)) {
    const [top, ...rest] = path.split('.')
    const row = rows.get(top)
    if (row === undefined) {
      failures.push(`${path}: DEFAULTS has ${show(value)}, the options table has no row for \`${top}\``)
      continue
    }
    let said
    if (rest.length === 0) {
      said = row.defaultCell
    } else {
      const leaf = rest[rest.length - 1]
      said = new RegExp(`\\b${leaf}: (min\\([^)]*\\)|'[^']*'|[^,}|]+)`).exec(row.text)?.[1]
      if (said === undefined) {
        failures.push(`${path}: DEFAULTS has ${show(value)}, README line ${row.line} (the \`${top}\` row) gives no \`${leaf}: …\``)
        continue
      }
    }
    const read = readDefault(said)
    if (read !== value) failures.push(`${path}: DEFAULTS has ${show(value)}, README line ${row.line} says ${said.trim()}`)
    checked++
  }
  // "`maxTimeMS` (default 5,000)" in the prose: the same value, or the check would pass while the README disagrees with itself
  const byLeaf = new Map(leaves(DEFAULTS).map(([path, value]) => [path.split('.').pop(), { path, value }]))
  markdown.split('\n').forEach((text, i) => {
    for (const m of text.matchAll(/`(\w+)` \(default ([^):]+)/g)) {
      const known = byLeaf.get(m[1])
      if (known === undefined) continue
      if (readDefault(m[2]) !== known.value) failures.push(`${known.path}: DEFAULTS has ${show(known.value)}, README line ${i + 1} says (default ${m[2].trim()}`)
      checked++
    }
  })
  return { failures, checked }
}

/** DEFAULTS and the option names of the package built next to `readme` (its dist/cjs: loaded synchronously). */
export function builtOptions (readme) {
  const file = join(dirname(readme), 'dist', 'cjs', 'options.js')
  try {
    return createRequire(import.meta.url)(file)
  } catch (err) {
    throw new Error(`cannot load ${file} for the options' defaults (run \`npm run build\` first): ${err.message}`)
  }
}

/** The docs/*.md files of this checkout (their ```ts blocks are checked beside the README's). */
export function docsFiles (base = root) {
  const docs = join(base, 'docs')
  return readdirSync(docs).filter(f => f.endsWith('.md')).sort().map(f => join(docs, f))
}

/**
 * Checks the options' defaults of `readme` against the package built next to it
 * (checkOptionDefaults), then writes each ```ts block of `readme` and of every file of `also`
 * into `dir` and typechecks it alone. `dir` must resolve 'fastify-write-buffer', 'fastify',
 * 'mongodb' and '@types/node' and be an ES module scope (the blocks use top-level await).
 * Returns the number of blocks; throws listing every error.
 */
export function checkReadme ({ readme = join(root, 'README.md'), dir, also = [] }) {
  const markdown = readFileSync(readme, 'utf8')
  if (tsBlocks(markdown).length === 0) throw new Error(`${readme} has no \`\`\`ts block`)
  const host = cachingHost(USER_OPTIONS)
  const failures = checkOptionDefaults(markdown, builtOptions(readme)).failures.map(f => `${basename(readme)}, options: ${f}`)
  let n = 0
  for (const source of [readme, ...also]) {
    const prefix = basename(source, '.md').toLowerCase()
    for (const { line, code } of tsBlocks(source === readme ? markdown : readFileSync(source, 'utf8'))) {
      const file = join(dir, `${prefix}-${line}.ts`)
      writeFileSync(file, code)
      const { text } = typecheck([file], USER_OPTIONS, host)
      if (text !== '') failures.push(`${relative(root, source) || basename(source)}, block at line ${line}:\n${text}`)
      n++
    }
  }
  if (failures.length > 0) throw new Error(`README: options' defaults disagree with DEFAULTS, or ts blocks do not compile under strict:\n\n${failures.join('\n')}`)
  return n
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const at = process.argv.indexOf('--dir')
  let dir
  let also = []
  if (at !== -1) {
    dir = resolve(process.argv[at + 1])
  } else {
    // inside the checkout, with no package.json of its own: 'fastify-write-buffer' resolves to
    // this package by its own name (through exports, to dist/), everything else to node_modules/
    dir = join(root, '.scratch', 'readme-check')
    rmSync(dir, { recursive: true, force: true })
    mkdirSync(dir, { recursive: true })
    also = docsFiles() // not in the packed tarball: checked here only
  }
  const started = performance.now()
  try {
    const n = checkReadme({ dir, also })
    console.log(`README: options' defaults match DEFAULTS, ${n} ts blocks (README${also.length > 0 ? ' + docs/*.md' : ''}) compile under strict (${relative(process.cwd(), dir) || '.'}, ${Math.round(performance.now() - started)} ms)`)
  } catch (err) {
    console.error(err.message)
    process.exit(1)
  }
}
