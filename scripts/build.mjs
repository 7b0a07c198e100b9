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
// One set of declarations for both builds: tsc's declarations are moved to dist/cjs/, and each
// dist/x.d.ts but the index (which re-exports its siblings) becomes `export * from './cjs/x.js'`
// (plus its default, by name). Two copies would declare two WriteBuffer classes (#private makes
// them distinct types), and a program with an ES module and a .cts file using the package loads
// both: Fastify's augmentation (`app.writeBuffer`) would be declared twice with two types
// (TS2717). This way round because an ES module may import CommonJS declarations under every
// module setting, while CommonJS ones re-exporting ES declarations need `resolution-mode`, which
// only type-only imports take (no classes as values) and node16 would reject otherwise (TS1479).
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { execFile } from 'node:child_process'
import { createRequire } from 'node:module'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { compileFunction } from 'node:vm'
import { writeCjsEntry } from './cjs-entry.mjs'

const root = fileURLToPath(new URL('..', import.meta.url))
const require = createRequire(import.meta.url)
const tsc = require.resolve('typescript/bin/tsc')
const ts = require('typescript')
const dist = join(root, 'dist')
const cjs = join(dist, 'cjs')

function fail (message) {
  process.stderr.write(`${message}\n`)
  process.exit(1)
}

rmSync(dist, { recursive: true, force: true })
try {
  await promisify(execFile)(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root })
} catch (err) {
  fail(`${err.stdout ?? ''}${err.stderr ?? ''}${err.stdout || err.stderr ? '' : err.message}`)
}

const config = ts.getParsedCommandLineOfConfigFile(join(root, 'tsconfig.build.cjs.json'), {}, {
  ...ts.sys,
  onUnRecoverableConfigFileDiagnostic: d => { throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n')) },
})
if (config.errors.length > 0) fail(config.errors.map(d => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('\n'))
const src = join(root, 'src')
for (const file of config.fileNames) {
  if (/\.d\.[cm]?ts$/.test(file)) continue
  if (!file.endsWith('.ts')) fail(`${relative(root, file)}: the CommonJS build transpiles .ts files only`)
  const path = relative(src, file).replace(/\.ts$/, '')
  const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), { compilerOptions: config.options, fileName: file })
  // what the second tsc run rejected and a transpile does not see: source that is valid only as
  // an ES module (import.meta, a top-level await) would throw when required; Node parses it here
  // as the CommonJS module it becomes
  try {
    compileFunction(outputText, ['exports', 'require', 'module', '__filename', '__dirname'], { filename: file })
  } catch (err) {
    fail(`${relative(root, file)}: not valid as CommonJS (${err.message}); no import.meta or top-level await in src`)
  }
  mkdirSync(dirname(join(cjs, path)), { recursive: true })
  writeFileSync(join(cjs, `${path}.js`), outputText)
  copyFileSync(join(dist, `${path}.d.ts`), join(cjs, `${path}.d.ts`))
  if (path !== 'index') forwardDeclarations(path)
}
writeFileSync(join(cjs, 'package.json'), '{ "type": "commonjs" }\n')
for (const file of readdirSync(src).filter(f => /\.(d\.cts|cjs)$/.test(f))) {
  for (const out of [dist, cjs]) copyFileSync(join(src, file), join(out, file))
}
writeCjsEntry(cjs)

/**
 * Rewrites dist/`path`.d.ts (an ES module's declarations, also at dist/cjs/`path`.d.ts) to
 * re-export dist/cjs/`path`.d.ts. An ES module importing CommonJS sees its `default` as the
 * whole module, so the default is re-exported by the name it is also exported under.
 */
function forwardDeclarations (path) {
  const file = join(dist, `${path}.d.ts`)
  const where = relative(root, file)
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false)
  const exportedAs = new Map() // local name → a name it is exported under
  let defaultOf // the local name exported as default
  for (const statement of source.statements) {
    const modifiers = ts.canHaveModifiers(statement) ? ts.getModifiers(statement) ?? [] : []
    if (ts.isExportAssignment(statement)) {
      if (statement.isExportEquals || !ts.isIdentifier(statement.expression)) fail(`${where}: \`export =\` or a default export that is not a name`)
      defaultOf = statement.expression.text
    } else if (ts.isExportDeclaration(statement)) {
      for (const e of statement.exportClause && ts.isNamedExports(statement.exportClause) ? statement.exportClause.elements : []) {
        if (statement.moduleSpecifier !== undefined) {
          if (e.name.text === 'default') fail(`${where}: a default export re-exported from another module; export it by name and \`export default\` the name`)
        } else if (e.name.text === 'default') defaultOf = (e.propertyName ?? e.name).text
        else exportedAs.set((e.propertyName ?? e.name).text, e.name.text)
      }
    } else if (modifiers.some(m => m.kind === ts.SyntaxKind.ExportKeyword)) {
      if (modifiers.some(m => m.kind === ts.SyntaxKind.DefaultKeyword)) fail(`${where}: an inline default export; export it by name and \`export default\` the name`)
      const names = ts.isVariableStatement(statement) ? statement.declarationList.declarations.map(d => d.name) : [statement.name]
      for (const name of names) if (name !== undefined && ts.isIdentifier(name)) exportedAs.set(name.text, name.text)
    }
  }
  const to = relative(dirname(file), join(cjs, `${path}.js`)).replaceAll('\\', '/')
  const specifier = to.startsWith('../') ? to : `./${to}`
  let text = `// the declarations of both builds are in dist/cjs/ (scripts/build.mjs)\nexport * from '${specifier}';\n`
  if (defaultOf !== undefined) {
    const named = exportedAs.get(defaultOf)
    if (named === undefined) fail(`${where}: the default export (${defaultOf}) must also be exported by name`)
    text += `export { ${named} as default } from '${specifier}';\n`
  }
  writeFileSync(file, text)
}
