/**
 * The API-path suite's rows by group: 'buffered' (awaited insertOne through the buffer), 'raw'
 * (bulkWrite of 1,000, 1/2/4 in flight: what bufferedVsBestRaw compares with) and 'split' (raw
 * keeping 1,000 out in smaller batches). Results from before 2026-11-27 carry no `group`: their
 * one buffered row is the first, and their split rows say "outstanding" in their names.
 */
export function apiPathGroup (row, index) {
  if (row.group !== undefined) return row.group
  if (index === 0) return 'buffered'
  return row.name.includes('outstanding') ? 'split' : 'raw'
}
