import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'

// No import cycles in src/, type-only imports included: a cycle through a type still ties two
// modules together (neither can be read, tested or moved without the other). What
// `madge --circular` reports, without the dependency.

const src = resolve(dirname(fileURLToPath(import.meta.url)), '../../src')
const files = readdirSync(src, { recursive: true, encoding: 'utf8' }).filter(f => /\.(ts|cts)$/.test(f) && !f.endsWith('.d.cts'))

/** Relative imports and re-exports of `file` (a path under src/), as paths under src/. */
function importsOf (file: string): string[] {
  const text = readFileSync(join(src, file), 'utf8')
  const found: string[] = []
  for (const m of text.matchAll(/^\s*(?:import|export)\b[^'"]*?\bfrom\s+'(\.{1,2}\/[^']+)'/gm)) {
    const target = relative(src, resolve(dirname(join(src, file)), m[1] ?? '')).replace(/\.js$/, '.ts')
    if (files.includes(target)) found.push(target)
  }
  return found
}

/** A cycle written from its first module in sorting order, closed: a → b → a, whatever the walk's start. */
function rotated (cycle: string[]): string[] {
  const first = cycle.indexOf([...cycle].sort()[0] ?? '')
  const from = [...cycle.slice(first), ...cycle.slice(0, first)]
  return [...from, from[0] ?? '']
}

function cycles (): string[][] {
  const graph = new Map(files.map(f => [f, importsOf(f)]))
  const found: string[][] = []
  const state = new Map<string, 'visiting' | 'done'>()
  const path: string[] = []
  const visit = (f: string): void => {
    state.set(f, 'visiting')
    path.push(f)
    for (const next of graph.get(f) ?? []) {
      if (state.get(next) === 'visiting') found.push(rotated(path.slice(path.indexOf(next))))
      else if (state.get(next) === undefined) visit(next)
    }
    path.pop()
    state.set(f, 'done')
  }
  for (const f of files) if (state.get(f) === undefined) visit(f)
  return found
}

it('the scan sees the imports (a control: index.ts re-exports core.ts)', () => {
  expect(importsOf('index.ts')).toContain('core.ts')
  expect(files.length).toBeGreaterThan(30)
})

it('src/ has no import cycles, type-only imports included', () => {
  expect(cycles().map(c => c.join(' → '))).toEqual([])
})
