// Child process: drives one autocannon run (programmatic API) and prints a JSON summary.
// A separate process so the load generator does not share the app's event loop.
// argv[2]: { url, connections, durationS, body } or { url, connections, durationS, users }
// (users: POST {username, password} of a random one of `users` pre-made users per request).
import autocannon from 'autocannon'

const cfg = JSON.parse(process.argv[2])
const opts = {
  url: cfg.url,
  connections: cfg.connections,
  duration: cfg.durationS,
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: cfg.body,
}
if (cfg.users !== undefined) {
  opts.requests = [{
    setupRequest: req => {
      const i = Math.floor(Math.random() * cfg.users)
      return { ...req, body: JSON.stringify({ username: `user${i}`, password: `pw${i}` }) }
    },
  }]
}
const cpu = process.cpuUsage()
const r = await autocannon(opts)
const used = process.cpuUsage(cpu)
process.stdout.write(JSON.stringify({
  requests: r.requests.total,
  durationS: r.duration,
  ok2xx: r['2xx'],
  non2xx: r.non2xx,
  errors: r.errors,
  timeouts: r.timeouts,
  p50Ms: r.latency.p50,
  p99Ms: r.latency.p99,
  cpuS: (used.user + used.system) / 1e6, // the load generator's own CPU while it ran
}))
