// One status line on stderr while a long part runs: redrawn in place on a terminal,
// printed once per part otherwise (CI logs, the test runner).
const tty = process.stderr.isTTY === true

/** Shows `label` with the elapsed time (of `expectedMs`, when known) until `fn` settles. */
export async function withProgress (label, fn, expectedMs) {
  if (!tty) {
    process.stderr.write(`[bench] ${label}\n`)
    return fn()
  }
  const start = performance.now()
  const of = expectedMs === undefined ? '' : ` / ${(expectedMs / 1000).toFixed(0)}`
  const draw = () => {
    const s = ((performance.now() - start) / 1000).toFixed(1)
    process.stderr.write(`\r\x1b[K[bench] ${label}  ${s}${of} s`)
  }
  draw()
  const timer = setInterval(draw, 250)
  try {
    return await fn()
  } finally {
    clearInterval(timer)
    process.stderr.write('\r\x1b[K')
  }
}
