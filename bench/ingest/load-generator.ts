import { runPhase } from './phases.js'
import { Presigner } from './presign.js'
import type { FromLoadGenerator, SourceKey, ToLoadGenerator } from './protocol.js'

/**
 * The load generator: a separate process (forked by run.ts) so that its CPU is its
 * own and the orchestrator's sampling never delays a send. It signs each phase's
 * requests before the phase's clock starts, then runs the phase and reports counts
 * and a latency histogram over IPC.
 */

const presigner = new Presigner()
let target: { port: number; sources: SourceKey[]; tag: string } | undefined

function send(message: FromLoadGenerator): void {
  process.send?.(message)
}

async function handle(message: ToLoadGenerator): Promise<void> {
  switch (message.kind) {
    case 'init':
      target = { port: message.port, sources: message.sources, tag: message.tag }
      send({ kind: 'ready' })
      return
    case 'phase': {
      if (target === undefined) throw new Error('phase before init')
      const { spec } = message
      const signStart = performance.now()
      const port = spec.port ?? target.port
      const pool = await presigner.sign(port, target.sources, target.tag, spec.budget)
      const signMs = performance.now() - signStart
      // The previous phase's requests and responses are garbage by now: a full
      // collection here, outside the window, keeps it from landing inside it.
      globalThis.gc?.()
      const outcome = await runPhase(port, pool, spec, () => send({ kind: 'started', name: spec.name }))
      send({ kind: 'result', result: outcome.stats.result(spec, outcome.windowMs, pool.size, signMs, outcome.loadgenCpuMs) })
      return
    }
    case 'exit':
      await presigner.close()
      process.disconnect?.()
      return
  }
}

// One message at a time: phases must not overlap.
let queue = Promise.resolve()
process.on('message', (message: ToLoadGenerator) => {
  queue = queue.then(() => handle(message)).catch((err: unknown) => {
    send({ kind: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) })
  })
})
// The orchestrator going away must not leave this process sending load.
process.on('disconnect', () => process.exit(0))
