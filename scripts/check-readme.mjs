// Typechecks every ```ts block of README.md on its own, under `strict`, against the built
// package: each block must compile by itself (its own imports and setup).
//
//   node scripts/check-readme.mjs              against this checkout's dist/ (run `npm run build` first)
//   node scripts/check-readme.mjs --dir DIR    against the package installed in DIR/node_modules
//                                              (scripts/check-package.mjs: the packed tarball)
//
// Each block is written to DIR/readme-<line>.ts and compiled as its own program (a file
// importing 'fastify-write-buffer' resolves it through the package's exports map, as a user's
// would). The programs share one compiler host, so lib, @types/node, mongodb and fastify
// declarations are parsed once.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
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

/**
 * Writes each ```ts block of `readme` into `dir` and typechecks it alone. `dir` must resolve
 * 'fastify-write-buffer', 'fastify', 'mongodb' and '@types/node' and be an ES module scope
 * (the blocks use top-level await). Returns the number of blocks; throws listing every error.
 */
export function checkReadme ({ readme = join(root, 'README.md'), dir }) {
  const blocks = tsBlocks(readFileSync(readme, 'utf8'))
  if (blocks.length === 0) throw new Error(`${readme} has no \`\`\`ts block`)
  const host = cachingHost(USER_OPTIONS)
  const failures = []
  for (const { line, code } of blocks) {
    const file = join(dir, `readme-${line}.ts`)
    writeFileSync(file, code)
    const { text } = typecheck([file], USER_OPTIONS, host)
    if (text !== '') failures.push(`${basename(readme)}, block at line ${line}:\n${text}`)
  }
  if (failures.length > 0) throw new Error(`README ts blocks do not compile under strict:\n\n${failures.join('\n')}`)
  return blocks.length
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const at = process.argv.indexOf('--dir')
  let dir
  if (at !== -1) {
    dir = resolve(process.argv[at + 1])
  } else {
    // inside the checkout, with no package.json of its own: 'fastify-write-buffer' resolves to
    // this package by its own name (through exports, to dist/), everything else to node_modules/
    dir = join(root, '.scratch', 'readme-check')
    rmSync(dir, { recursive: true, force: true })
    mkdirSync(dir, { recursive: true })
  }
  const started = performance.now()
  try {
    const n = checkReadme({ dir })
    console.log(`README: ${n} ts blocks compile under strict (${relative(process.cwd(), dir) || '.'}, ${Math.round(performance.now() - started)} ms)`)
  } catch (err) {
    console.error(err.message)
    process.exit(1)
  }
}
