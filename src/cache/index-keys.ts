import type { Document } from 'mongodb'
import { equalities } from './filter-facts.js'
import type { Answer, Footprint } from './footprint.js'
import { keyOf, UNKNOWN, valueHash, valueKeys } from './value-keys.js'

/**
 * Index keys (per collection) of footprints and answers (footprint.ts), in one key space: a
 * footprint can affect an answer only if they share a key — affects(fp, a) implies
 * footprintKeys(fp) ∩ answerKeys(a) ≠ ∅ — so entries are indexed by their answer's keys and
 * unsettled writes by their footprint's, and each side finds the other's candidates without
 * visiting the rest.
 */
export const ALL = '*'
const FOUND = '+'
const UNKNOWN_ID = 'u'
const PROJECTED = 'p'
const ANY_NEW_ID = 'n*'
const ANY_FIELD = 'fa'
export const idIndexKey = (target: string): string => `i\0${target}`
export const newIdIndexKey = (target: string): string => `n\0${target}`
/** a found, unprojected document holds a value of this key in `field` */
export const docFieldKey = (field: string, valueKey: string): string => `f\0${field}\0${valueKey}`
const hashKey = (hash: number): string => `h\0${hash}`
const fieldKey = (field: string): string => `ff\0${field}`

export function footprintKeys (fp: Footprint): string[] {
  if (fp.all) return [ALL]
  const keys: string[] = []
  if (fp.anyDoc) keys.push(FOUND)
  for (const t of fp.ids) keys.push(idIndexKey(t))
  for (const t of fp.newIds) keys.push(newIdIndexKey(t))
  if (fp.anyNewId) keys.push(ANY_NEW_ID)
  if (fp.filters.length > 0) {
    keys.push(PROJECTED)
    for (const f of fp.filters) {
      // the first equality is enough: a document matching the filter holds its value (or one not decided)
      const [field, v] = (equalities(f) as Array<[string, unknown]>)[0] as [string, unknown]
      keys.push(docFieldKey(field, keyOf(v)), docFieldKey(field, UNKNOWN))
    }
  }
  for (const h of fp.hashes) keys.push(hashKey(h))
  for (const f of fp.fields) keys.push(fieldKey(f))
  if (fp.anyField) keys.push(ANY_FIELD)
  return keys
}

/**
 * The keys under which the cached entries a footprint may affect are listed: its own keys,
 * and the answers that do not show their `_id` when it changes documents by `_id` (unsettled
 * writes are not listed under that key: a read of such an answer checks every noted write).
 */
export function entryKeys (fp: Footprint, keys: readonly string[]): readonly string[] {
  return fp.ids.length > 0 && !fp.all ? [...keys, UNKNOWN_ID] : keys
}

/** The keys of the footprints that may change or create the document of `_id` target `t`, or touch any. */
export function documentKeys (t: string): string[] {
  return [ALL, FOUND, idIndexKey(t), newIdIndexKey(t), ANY_NEW_ID]
}

/**
 * The keys of an answer, but the per-field keys of its document (`docFieldKeys`), which the
 * entry store keeps apart so that a patch redoes only the fields it changed.
 */
export function answerKeys (a: Answer): string[] {
  const keys = [ALL]
  if (a.found) {
    keys.push(FOUND, a.idKey === undefined ? UNKNOWN_ID : idIndexKey(a.idKey))
    if (a.projected) keys.push(PROJECTED)
  } else if (a.filterId !== undefined) {
    keys.push(newIdIndexKey(a.filterId), ANY_NEW_ID)
  }
  if (a.filterId === undefined) {
    keys.push(ANY_FIELD)
    for (const field in a.filter) keys.push(fieldKey(field), hashKey(valueHash(field, keyOf(a.filter[field]))))
  }
  return keys
}

/** The per-field keys of a found, unprojected answer's document: one list per top-level field. */
export function docFieldKeys (doc: Document, each: (field: string, keys: string[]) => void): void {
  for (const field in doc) each(field, valueKeys(doc[field]).map(k => docFieldKey(field, k)))
}
