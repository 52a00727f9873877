import { uws } from '../../gateway/http/uws.js'

/**
 * The latency floor (`node floor-server.js PORT`): the same uWebSockets.js build with
 * nothing behind it. It reads each request's body and answers 202 with a body of the
 * gateway's size, in its own process. Paced at the half-peak rate by the same load
 * generator, its p99 is what this machine's scheduling, the kernel and the load
 * generator cost by themselves: on a shared 2-vCPU machine that part moves from run
 * to run, and the gateway's figure is read against it (run.ts).
 */

const port = Number(process.argv[2])
if (!Number.isInteger(port) || port <= 0) throw new Error(`usage: floor-server.js PORT (got ${process.argv[2]})`)

/** About the size of the gateway's 202 body. */
const BODY = JSON.stringify({
  ok: true,
  data: { signal_id: 'x'.repeat(40), source_id: 'src_'.padEnd(30, 'x'), received_at: new Date(0).toISOString(), status: 'accepted', test: false },
})

uws
  .App()
  .post('/*', (res) => {
    let aborted = false
    res.onAborted(() => {
      aborted = true
    })
    res.onData((_chunk, isLast) => {
      if (!isLast || aborted) return
      res.cork(() => {
        res.writeStatus('202 Accepted').writeHeader('content-type', 'application/json').end(BODY)
      })
    })
  })
  .listen('127.0.0.1', port, (socket) => {
    if (socket === false) {
      process.stderr.write(`floor server: cannot listen on ${port}\n`)
      process.exit(1)
    }
    process.stdout.write('ready\n')
  })
