// Reproduces a mongodb driver (7.9) wedge, for an upstream report (README, "Known driver issues").
// With a server that does not stream heartbeats (no topologyVersion in hello: FerretDB, DocumentDB),
// a heartbeat started after the monitor's socket was destroyed but before its 'close' was emitted
// (the window a peer's FIN opens) writes to the destroyed socket, which returns false and emits
// nothing, and waits for a 'drain' that never comes: the check never ends, the monitor never checks
// again, and once the server is marked Unknown every server selection fails until the client is
// recreated. Usage: node scripts/repro/driver-monitor-wedge.cjs [mongodb://127.0.0.1:27018]
const { MongoClient } = require('mongodb')
const { ServerDescription } = require('mongodb/lib/sdam/server_description')

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function main () {
  const uri = process.argv[2] ?? 'mongodb://127.0.0.1:27018/?directConnection=true'
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 1500 })
  let checkSince = 0
  client.on('serverHeartbeatStarted', () => { checkSince = Date.now() })
  client.on('serverHeartbeatSucceeded', () => { checkSince = 0 })
  client.on('serverHeartbeatFailed', () => { checkSince = 0 })
  await client.connect()
  const server = [...client.topology.s.servers.values()][0]
  if (server.description.topologyVersion != null) console.log('this server streams heartbeats: the monitor resets itself, the wedge needs a polling server')
  await sleep(700) // past minHeartbeatFrequencyMS, so a requested check starts at once
  server.monitor.connection.socket.destroy() // the socket is destroyed; its 'close' comes later
  server.monitor.requestCheck() // a server selection asks for a check within that window
  await sleep(3000)
  console.log(`heartbeat under way for ${checkSince === 0 ? 0 : Date.now() - checkSince} ms (monitor state: ${server.monitor.s.state})`)
  // a pool connection's network error marks the server Unknown: from here, selection never recovers
  server.emit('descriptionReceived', new ServerDescription(server.description.hostAddress, undefined, { error: new Error('connection 14 closed') }))
  try {
    await client.db('wedge').command({ ping: 1 })
    console.log('not wedged: the ping was answered')
  } catch (err) {
    console.log(`wedged: ${err.name}: ${err.message}`)
  }
  process.exit(0)
}
main()
