/**
 * Measures every case once per pass, interleaved (so drift on a shared machine hits all
 * cases alike), and keeps each case's fastest row (`rate`).
 */
export async function bestOf (passes, cases, measure) {
  const best = new Map()
  for (let pass = 1; pass <= passes; pass++) {
    for (const c of cases) {
      const row = await measure(c, pass)
      if (!(best.get(c)?.rate >= row.rate)) best.set(c, row)
    }
  }
  return cases.map(c => best.get(c))
}
