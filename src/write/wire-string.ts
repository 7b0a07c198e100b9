/** ES2024 string methods (Node ≥ 20 has them; the compiled lib is ES2022). */
export interface WellFormedString { isWellFormed: () => boolean, toWellFormed: () => string }

/**
 * A string as the driver encodes it: js-bson writes strings (values and field names) as UTF-8
 * through Buffer#write, which replaces each lone UTF-16 surrogate with U+FFFD — exactly what
 * String#toWellFormed does. So `'\uD800'` and `'\uFFFD'` are one value on the server.
 */
export function wellFormedString (s: string): string {
  return (s as unknown as WellFormedString).isWellFormed() ? s : (s as unknown as WellFormedString).toWellFormed()
}
