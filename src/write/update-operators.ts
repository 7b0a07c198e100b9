import type { Document } from 'mongodb'
import { InvalidWriteError, describe } from '../errors.js'

/**
 * What MongoDB refuses in an update before running it, checked at submit so that it fails
 * its own write only. MongoDB refuses these per statement (a writeError, code 9 / 14), but a
 * compatible server may refuse the whole command, or apply the bad statement as a no-op and
 * drop a good one (measured on FerretDB 1.24: `$foo` and `$inc: 'x'`).
 *
 * The operator list is the server's (mongodb/mongo src/mongo/db/update/modifier_table.cpp);
 * the pipeline stages an update accepts are from its pipeline-style update docs
 * ($addFields, $set, $project, $unset, $replaceRoot, $replaceWith).
 */
const OPERATORS = new Set([
  '$addToSet', '$bit', '$currentDate', '$inc', '$max', '$min', '$mul', '$pop', '$pull', '$pullAll', '$push',
  '$rename', '$set', '$setOnInsert', '$unset',
])
const PIPELINE_STAGES = new Set(['$addFields', '$set', '$project', '$unset', '$replaceRoot', '$replaceWith'])
const NUMERIC_BSON = new Set(['Long', 'Int32', 'Double', 'Decimal128'])
const BIT_OPS = new Set(['and', 'or', 'xor'])

function isNumeric (v: unknown): boolean {
  if (typeof v === 'number' || typeof v === 'bigint') return true
  const t = (v as { _bsontype?: unknown } | null)?._bsontype
  return typeof t === 'string' && NUMERIC_BSON.has(t)
}

function isInteger (v: unknown): boolean {
  if (typeof v === 'number') return Number.isInteger(v)
  if (typeof v === 'bigint') return true
  const t = (v as { _bsontype?: unknown } | null)?._bsontype
  return t === 'Long' || t === 'Int32'
}

/** Checks an operator-style update's operators and the operands the server types; throws InvalidWriteError naming the path. */
export function checkUpdateOperators (update: Document): void {
  for (const op in update) {
    const problem = operatorProblem(op, update[op] as Document)
    if (problem !== undefined) throw new InvalidWriteError(problem)
  }
}

/** What is wrong with one operator of an update and its fields (see checkUpdateOperators), or undefined. */
export function operatorProblem (op: string, fields: Document): string | undefined {
  if (!OPERATORS.has(op)) return `unknown update operator ${JSON.stringify(op)} (MongoDB's are ${[...OPERATORS].join(', ')})`
  switch (op) {
    case '$inc':
    case '$mul':
      for (const path in fields) {
        if (!isNumeric(fields[path])) return `${op} needs a number for ${JSON.stringify(path)}, got ${describe(fields[path])}`
      }
      break
    case '$pop':
      for (const path in fields) {
        if (fields[path] !== 1 && fields[path] !== -1) return `$pop needs 1 or -1 for ${JSON.stringify(path)}, got ${describe(fields[path])}`
      }
      break
    case '$rename':
      for (const path in fields) {
        if (typeof fields[path] !== 'string') return `$rename needs a string for ${JSON.stringify(path)}, got ${describe(fields[path])}`
      }
      break
    case '$currentDate':
      for (const path in fields) {
        const v: unknown = fields[path]
        const type = (v as { $type?: unknown } | null)?.$type
        if (v !== true && v !== false && type !== 'date' && type !== 'timestamp') {
          return `$currentDate needs true or { $type: 'date' | 'timestamp' } for ${JSON.stringify(path)}, got ${describe(v)}`
        }
      }
      break
    case '$bit':
      for (const path in fields) {
        const spec: unknown = fields[path]
        let ok = typeof spec === 'object' && spec !== null
        for (const k in spec as Document) ok &&= BIT_OPS.has(k) && isInteger((spec as Document)[k])
        if (!ok) return `$bit needs { and | or | xor: integer } for ${JSON.stringify(path)}, got ${describe(spec)}`
      }
      break
  }
  return undefined
}

/** Checks that each stage of a pipeline-style update is one MongoDB accepts there. */
export function checkPipelineStages (stages: readonly Document[]): void {
  for (let i = 0; i < stages.length; i++) {
    const stage = stages[i] as Document
    for (const name in stage) {
      if (!PIPELINE_STAGES.has(name)) {
        throw new InvalidWriteError(`update pipeline stage ${i} is ${JSON.stringify(name)}; an update pipeline takes only ${[...PIPELINE_STAGES].join(', ')}`)
      }
    }
  }
}
