// The CommonJS entry as Fastify plugins have it (called by scripts/build.mjs once both builds are written):
//   require('fastify-write-buffer')                      → the plugin function itself,
//   require('fastify-write-buffer').default              → the same function,
//   require('fastify-write-buffer').fastifyWriteBuffer   → the same function,
//   require('fastify-write-buffer').WriteBuffer …        → every other export of src/index.ts.
// tsc's CommonJS output of src/index.ts sets `exports.default`; one line appended to it makes
// `module.exports` the plugin with the exports attached. Its ES-style declarations would then
// lie (they describe an object with a `default`), so they are replaced by an `export =`
// declaration: a function merged with a namespace holding every export of the index, each an
// alias of its declaration in the module that declares it (the names come from tsc's own
// declarations of src/index.ts, so nothing is listed twice). The result is compiled here.
// `fastify-write-buffer/core` is untouched.
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import ts from 'typescript'

const MARK = '// appended by scripts/cjs-entry.mjs'

/** Rewrites dist/cjs/index.js and dist/cjs/index.d.ts in `cjsDir`; throws when the result does not compile. */
export function writeCjsEntry (cjsDir) {
  const js = join(cjsDir, 'index.js')
  const dts = join(cjsDir, 'index.d.ts')
  if (readFileSync(js, 'utf8').includes(MARK)) throw new Error(`${js} was already rewritten: build from a clean dist/`)
  appendFileSync(js, `${MARK}: require() returns the plugin itself, with .default and every named export on it
module.exports = Object.assign(exports.default, exports);
`)
  writeFileSync(dts, declarations(dts))
  const options = { strict: true, noEmit: true, module: ts.ModuleKind.CommonJS, moduleResolution: ts.ModuleResolutionKind.Node10, types: ['node'], skipLibCheck: false }
  const program = ts.createProgram([dts], options)
  // the rewritten file's own diagnostics: checking it resolves what it uses, not every library's declarations
  const file = program.getSourceFile(dts)
  const problems = [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)]
  if (problems.length > 0) {
    throw new Error(ts.formatDiagnostics(problems, { getCanonicalFileName: f => f, getCurrentDirectory: () => cjsDir, getNewLine: () => '\n' }))
  }
}

/** The `export =` declaration of the index whose tsc declarations are at `dts`. */
function declarations (dts) {
  const program = ts.createProgram([dts], { noEmit: true, module: ts.ModuleKind.CommonJS, moduleResolution: ts.ModuleResolutionKind.Node10, types: [] })
  const checker = program.getTypeChecker()
  const index = checker.getSymbolAtLocation(program.getSourceFile(dts))
  const modules = new Map() // relative specifier → namespace alias
  const lines = []
  let plugin
  for (const exported of checker.getExportsOfModule(index)) {
    const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported
    const declaration = target.declarations?.[0]
    if (declaration === undefined) throw new Error(`no declaration for ${exported.name}`)
    const file = declaration.getSourceFile().fileName
    const specifier = './' + relative(dirname(dts), file).replaceAll('\\', '/').replace(/\.d\.ts$/, '.js')
    if (!modules.has(specifier)) modules.set(specifier, `m${modules.size}`)
    const from = `${modules.get(specifier)}.${target.name}`
    if (exported.name === 'default') plugin = from
    else lines.push(`  export import ${exported.name} = ${from}`)
  }
  if (plugin === undefined) throw new Error('src/index.ts has no default export')
  if (!lines.some(l => l.startsWith('  export import fastifyWriteBuffer ='))) throw new Error('src/index.ts does not export fastifyWriteBuffer')
  return `${MARK}: \`require('fastify-write-buffer')\` is the plugin itself, with .default and every named export
${[...modules].map(([specifier, name]) => `import * as ${name} from '${specifier}'`).join('\n')}

declare function fastifyWriteBuffer (...args: Parameters<typeof ${plugin}>): ReturnType<typeof ${plugin}>
declare namespace fastifyWriteBuffer {
${lines.join('\n')}
  export { fastifyWriteBuffer as default }
}
export = fastifyWriteBuffer
`
}
