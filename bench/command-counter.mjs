// Counts the commands a MongoClient sends (driver command monitoring), per command name
// and collection, with the number of statements in insert/update/delete commands and,
// for finds, how many times each value of `perKey` was looked up.

const STATEMENTS = { insert: 'documents', update: 'updates', delete: 'deletes' }

export class CommandCounter {
  #counts = new Map()
  #lookups = new Map()

  /** `client` must be created with `monitorCommands: true`. */
  constructor (client, { perKey } = {}) {
    client.on('commandStarted', ev => {
      const name = ev.commandName
      const coll = ev.command[name]
      if (typeof coll !== 'string') return
      const key = `${name}\0${coll}`
      const c = this.#counts.get(key) ?? { commands: 0, statements: 0 }
      c.commands++
      c.statements += STATEMENTS[name] === undefined ? 1 : ev.command[STATEMENTS[name]].length
      this.#counts.set(key, c)
      const value = perKey === undefined ? undefined : ev.command.filter?.[perKey]
      if (name === 'find' && value !== undefined) this.#lookups.set(value, (this.#lookups.get(value) ?? 0) + 1)
    })
  }

  /** Counts so far, to diff against later with `since`. */
  snapshot () {
    return { counts: new Map([...this.#counts].map(([k, v]) => [k, { ...v }])), lookups: new Map(this.#lookups) }
  }

  /** Commands and statements of one command name on one collection since `snap`. */
  since (snap, name, coll) {
    const key = `${name}\0${coll}`
    const now = this.#counts.get(key) ?? { commands: 0, statements: 0 }
    const then = snap.counts.get(key) ?? { commands: 0, statements: 0 }
    return { commands: now.commands - then.commands, statements: now.statements - then.statements }
  }

  /** Finds by `perKey` since `snap`: how many, for how many distinct values, most for one value. */
  lookupsSince (snap) {
    let finds = 0
    let values = 0
    let max = 0
    for (const [value, n] of this.#lookups) {
      const d = n - (snap.lookups.get(value) ?? 0)
      if (d > 0) { finds += d; values++; max = Math.max(max, d) }
    }
    return { finds, values, max }
  }
}
