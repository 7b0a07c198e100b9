/** What `fn` throws, or undefined if it returns: for assertions on the error object itself (its class, code, fields). */
export function thrownBy (fn: () => unknown): unknown {
  try {
    fn()
  } catch (err) {
    return err
  }
  return undefined
}
