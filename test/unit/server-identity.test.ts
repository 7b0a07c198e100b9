import { describe, expect, it } from 'vitest'
import { looksLikeMongoDB, reportsStatements, ServerIdentity } from '../../src/mongo/server-identity.js'

// buildInfo as each server answers it (fields the verdicts read; FerretDB's measured here)
const MONGODB = { version: '7.0.12', gitVersion: 'b6e3e8c46b3ef9e8f4b4f2a1c0d9e8f7a6b5c4d3', allocator: 'tcmalloc', versionArray: [7, 0, 12, 0] }
const FERRETDB_1 = { version: '7.0.42', gitVersion: 'unknown', versionArray: [7, 0, 42, 0], ferretdbVersion: 'v1.24.2' }
const FERRETDB_2 = { version: '7.0.77', gitVersion: 'unknown', versionArray: [7, 0, 77, 0], ferretdb: { version: 'v2.5.0', package: 'unknown' } }

describe('server identity', () => {
  it('only MongoDB is MongoDB', () => {
    expect([MONGODB, FERRETDB_1, FERRETDB_2, {}].map(looksLikeMongoDB)).toEqual([true, false, false, false])
  })

  it('write errors are read by index from MongoDB and FerretDB 2 (DocumentDB), not FerretDB 1.x nor an unknown server', () => {
    expect([MONGODB, FERRETDB_1, FERRETDB_2, {}, { ferretdb: { version: 'v1.9.0' } }].map(reportsStatements)).toEqual([true, false, true, false, false])
  })
})

describe('ServerIdentity: who the server is, asked without flooding it (review)', () => {
  it('a buildInfo the server refuses (Stable API strict: APIStrictError 323) is final: not MongoDB, never asked again', async () => {
    let asked = 0
    const identity = new ServerIdentity({ command: async () => { asked++; throw Object.assign(new Error('buildInfo is not in API version 1'), { code: 323 }) } })
    for (let i = 0; i < 5; i++) expect(await identity.isMongoDB()).toBe(false)
    expect(identity.knownMongoDB()).toBe(false)
    expect(asked).toBe(1)
  })

  it('a buildInfo that cannot reach the server is asked again, but not at every batch', async () => {
    let asked = 0
    const identity = new ServerIdentity({ command: async () => { asked++; throw new Error('connection refused') } })
    for (let i = 0; i < 5; i++) expect(await identity.isMongoDB()).toBe(false)
    expect(identity.knownMongoDB()).toBeUndefined()
    expect(asked).toBe(1)
  })

  it('an answer is kept', async () => {
    let asked = 0
    const identity = new ServerIdentity({ command: async () => { asked++; return MONGODB } })
    expect(await identity.isMongoDB()).toBe(true)
    expect(await identity.isMongoDB()).toBe(true)
    expect([identity.knownMongoDB(), asked]).toEqual([true, 1])
  })
})
