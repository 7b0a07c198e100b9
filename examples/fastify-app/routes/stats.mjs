/** GET /stats → the write buffer's and the read cache's counters (for development). */
export default async function statsRoute (app) {
  app.get('/stats', async () => ({
    buffer: app.writeBuffer.stats(),
    cache: app.writeBuffer.cache?.stats(),
  }))
}
