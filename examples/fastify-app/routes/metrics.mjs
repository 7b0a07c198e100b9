import { Counter, Gauge, Registry } from 'prom-client'

/**
 * GET /metrics → Prometheus text format (prom-client): the write buffer's gauges and counters
 * and its two latency distributions, read from `stats()` when scraped (nothing per write).
 */
export default async function metricsRoute (app) {
  const registry = new Registry()
  const stats = () => app.writeBuffer.stats()
  const gauge = (name, help, read) => new Gauge({ name, help, registers: [registry], collect () { this.set(read(stats())) } })
  gauge('fwb_pending_writes', 'Writes queued, in flight or waiting to be retried', s => s.pending)
  gauge('fwb_waiting_writes', 'Writes waiting for room (onFull: wait)', s => s.waiting)
  gauge('fwb_in_flight_bulk_writes', 'bulkWrite commands on the wire', s => s.inFlight)
  gauge('fwb_in_flight_limit', 'bulkWrite commands that may be on the wire now (the adaptive limit, 1 to maxInFlight)', s => s.inFlightLimit)
  gauge('fwb_overload_pace_writes_per_second', 'While the server refuses writes as overloaded, the writes per second the buffer sends at most; 0 = no pace', s => s.overloadPace)

  // cumulative totals in stats() become Prometheus counters: each scrape adds what happened since the last
  const counter = (name, help, read) => {
    let last = 0
    return new Counter({
      name,
      help,
      registers: [registry],
      collect () {
        const now = read(stats())
        if (now > last) this.inc(now - last)
        last = now
      },
    })
  }
  counter('fwb_bulk_writes_total', 'bulkWrite commands sent', s => s.batches)
  counter('fwb_acknowledged_writes_total', 'Writes acknowledged by the server', s => s.acknowledgedOps)
  counter('fwb_failed_writes_total', 'Writes rejected after reaching the buffer', s => s.failedOps)
  counter('fwb_coalesced_writes_total', 'Writes coalesced into an earlier write of the same document', s => s.coalescedOps)
  counter('fwb_retried_batches_total', 'Batches sent again after a transient failure', s => s.retries)
  counter('fwb_overloaded_batches_total', 'Batches the server refused or interrupted as overloaded', s => s.overloadedBatches)
  counter('fwb_shed_writes_total', 'Writes refused at the door (WRITE_BUFFER_SHED): they would have passed their deadline queued', s => s.shedOps)

  // the buffer's latency distributions (HDR histograms, last 1–2 minutes) as quantile gauges
  for (const [key, name, help] of [
    ['queueWaitMs', 'fwb_queue_wait_ms', 'How long the oldest write of a batch waited in its queue'],
    ['roundTripMs', 'fwb_round_trip_ms', 'bulkWrite round trip'],
  ]) {
    new Gauge({ // eslint-disable-line no-new -- registered on creation
      name,
      help: `${help} (ms, quantiles over the last 1-2 minutes)`,
      labelNames: ['quantile'],
      registers: [registry],
      collect () {
        const d = stats()[key]
        for (const [q, v] of [['0.5', d.p50], ['0.9', d.p90], ['0.99', d.p99], ['1', d.max]]) this.set({ quantile: q }, v)
      },
    })
    gauge(`${name}_count`, `${help}: batches measured`, s => s[key].count)
  }

  app.get('/metrics', async (request, reply) => {
    reply.type(registry.contentType)
    return registry.metrics()
  })
}
