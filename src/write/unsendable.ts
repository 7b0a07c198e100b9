import { BSON } from 'mongodb'

/**
 * What the driver's BSON serializer refuses to send, found before it is asked to: a NUL byte
 * in a key (BSON keys are C strings) or in a regular expression's pattern or flags. The
 * serializer throws at send time, for the whole bulkWrite (PITFALLS 16); found at submit, the
 * write is refused alone, naming the path. Also used after a send-time serializer failure to
 * tell which writes of a batch cannot be sent (a document changed after submit).
 *
 * Walks what BSON walks: own enumerable keys of objects, arrays, Map entries, the value a
 * `toBSON()` returns. Returns a message naming the path, or undefined when all is sendable.
 */
export function findUnsendable (value: unknown, path = ''): string | undefined {
  return walk(value, path, 0)
}

const MAX_DEPTH = 200

function walk (v: unknown, path: string, depth: number): string | undefined {
  if (typeof v !== 'object' || v === null || depth > MAX_DEPTH) return undefined
  if (v instanceof RegExp) return regexProblem(v.source, v.flags, path)
  const bsontype = (v as { _bsontype?: unknown })._bsontype
  if (bsontype === 'BSONRegExp') {
    const r = v as BSON.BSONRegExp
    return regexProblem(r.pattern, r.options, path)
  }
  if (bsontype !== undefined || v instanceof Date || ArrayBuffer.isView(v)) return undefined
  const toBSON = (v as { toBSON?: unknown }).toBSON
  if (typeof toBSON === 'function') {
    let out: unknown
    try {
      out = (toBSON as () => unknown).call(v)
    } catch (err) {
      return `${where(path)}toBSON() threw (${(err as Error | null)?.message ?? String(err)})`
    }
    return out === v ? undefined : walk(out, path, depth + 1)
  }
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const found = walk(v[i], join(path, String(i)), depth + 1)
      if (found !== undefined) return found
    }
    return undefined
  }
  if (v instanceof Map) {
    for (const [k, item] of v) {
      const found = keyProblem(String(k), path) ?? walk(item, join(path, String(k)), depth + 1)
      if (found !== undefined) return found
    }
    return undefined
  }
  for (const k in v) {
    const found = keyProblem(k, path) ?? walk((v as Record<string, unknown>)[k], join(path, k), depth + 1)
    if (found !== undefined) return found
  }
  return undefined
}

function keyProblem (key: string, path: string): string | undefined {
  return key.includes('\0') ? `key ${JSON.stringify(key)}${path === '' ? '' : ` in ${path}`} contains a NUL byte` : undefined
}

function regexProblem (pattern: string, flags: string, path: string): string | undefined {
  if (pattern.includes('\0')) return `${where(path)}regular expression pattern contains a NUL byte`
  if (flags.includes('\0')) return `${where(path)}regular expression flags contain a NUL byte`
  return undefined
}

function where (path: string): string { return path === '' ? '' : `${path}: ` }
function join (path: string, key: string): string { return path === '' ? key : `${path}.${key}` }
