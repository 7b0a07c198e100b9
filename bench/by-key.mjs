/** A suite's result rows by their `key`. */
export const byKey = rows => Object.fromEntries(rows.map(r => [r.key, r]))
