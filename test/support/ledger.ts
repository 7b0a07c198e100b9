/**
 * What callers were told, to compare with what the database holds afterwards.
 * Every write carries a unique marker; after the run:
 *   acknowledged → exactly one copy in the database;
 *   rejected with outcome 'not-sent' or 'rejected' → no copy;
 *   outcome 'unknown' → zero or one copy;
 *   never more than one copy (nothing applied twice), never an unsettled promise.
 */
export interface Told { marker: number, ok: boolean, outcome?: string, code?: unknown, message?: string }

export class Ledger {
  readonly told: Told[] = []
  #unsettled = 0

  track (marker: number, p: Promise<unknown>): Promise<void> {
    this.#unsettled++
    return p.then(
      () => { this.told.push({ marker, ok: true }) },
      (err: { outcome?: string, code?: unknown, message?: string }) => { this.told.push({ marker, ok: false, outcome: err.outcome, code: err.code, message: err.message }) }
    ).finally(() => { this.#unsettled-- })
  }

  get unsettled (): number { return this.#unsettled }

  /** How many callers were told each failure (`outcome code: message`), for a failing test's report. */
  failures (): Record<string, number> {
    const byKind: Record<string, number> = {}
    for (const t of this.told) {
      if (t.ok) continue
      const key = `${String(t.outcome)} ${String(t.code)}: ${t.message ?? ''}`
      byKind[key] = (byKind[key] ?? 0) + 1
    }
    return byKind
  }

  /** `copies` maps marker → how many documents (or applications) the database shows. */
  audit (copies: Map<number, number>): { attempted: number, acknowledged: number, found: number, lost: number, duplicated: number, phantom: number, unknown: number } {
    let acknowledged = 0; let found = 0; let lost = 0; let duplicated = 0; let phantom = 0; let unknown = 0
    for (const t of this.told) {
      const n = copies.get(t.marker) ?? 0
      if (n > 0) found++
      if (n > 1) duplicated++
      if (t.ok) {
        acknowledged++
        if (n === 0) lost++
      } else if (t.outcome === 'unknown') {
        unknown++
      } else if (n > 0) {
        phantom++ // told "not written" but it was
      }
    }
    return { attempted: this.told.length, acknowledged, found, lost, duplicated, phantom, unknown }
  }
}
