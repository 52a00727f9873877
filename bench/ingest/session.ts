import { availableParallelism } from 'node:os'
import { LatencyHistogram } from './histogram.js'
import { measureVerifyRate } from '../verify-ceiling.js'
import { startFloorServer, type FloorServer } from './floor-process.js'
import { startBenchGateway, type BenchGateway } from './gateway-process.js'
import { LoadGeneratorProcess } from './load-generator-process.js'
import { filesystemOf } from './machine-info.js'
import { cpuNoiseLine, measureCpuNoise } from './cpu-noise.js'
import { CEILING_MS, NOISE_MS, SOURCES } from './options.js'
import { ProcessSampler } from './process-sampler.js'
import type { PhaseSpec } from './protocol.js'
import { provisionSources } from './provision.js'
import { figures, floorLines, formatRate, phaseLines, type FloorFigures, type PhaseFigures } from './report.js'
import { acceptLatencyBuckets, bucketQuantile } from './gateway-metrics.js'

/** One gateway with its sources and a load generator, and the phases run against it. */

export const print = (line = '') => process.stdout.write(`${line}\n`)

/** Makes every run's signal ids distinct, should two runs ever share a DATA_DIR. */
const tag = Date.now().toString(36)

/** Live gateways, so that Ctrl-C still stops them and removes their DATA_DIR. */
const cleanups = new Set<() => Promise<unknown>>()
process.once('SIGINT', () => {
  void Promise.allSettled([...cleanups].map((fn) => fn())).then(() => process.exit(130))
})

/** Single-core sodium-native verifies/s, on this (otherwise idle) orchestrator thread. */
export async function ceiling(label: string): Promise<number> {
  const rate = await measureVerifyRate('sodium-native', CEILING_MS)
  print(`verify ceiling (${label}): sodium-native ${formatRate(rate)} verifies/s on one core (${CEILING_MS / 1000} s, this process)`)
  print(`  ${cpuNoiseLine(await measureCpuNoise(NOISE_MS))}`)
  return rate
}

export interface Session {
  readonly gw: BenchGateway
  readonly sampler: ProcessSampler
  /** Runs one phase and prints it; CPU and RSS cover the timed window only. */
  phase(spec: PhaseSpec): Promise<PhaseFigures>
  /** Runs one open-loop phase against the latency floor's bare server (floor-server.ts) and prints it. */
  floor(spec: PhaseSpec): Promise<FloorFigures>
}

function printGateway(gw: BenchGateway): void {
  const c = gw.config
  const threads = c.VERIFY_THREADS === 0 ? `0 (= ${Math.max(1, availableParallelism() - 1)}, cores less one)` : String(c.VERIFY_THREADS)
  print(`gateway pid ${gw.pid} on ${gw.url}: VERIFY_THREADS ${threads}, VERIFY_BATCH ${c.VERIFY_BATCH}, VERIFY_QUEUE_LIMIT ${c.VERIFY_QUEUE_LIMIT}, JOURNAL_FSYNC ${c.JOURNAL_FSYNC}, LOG_LEVEL ${c.LOG_LEVEL}`)
  print(`  DATA_DIR ${gw.dataDir} on ${filesystemOf(gw.dataDir)}`)
}

/** Gateway + sources + load generator for the duration of `body`, torn down whatever happens. */
export async function withSession<T>(env: Record<string, string>, body: (s: Session) => Promise<T>): Promise<T> {
  const gw = await startBenchGateway(env)
  const stopGateway = async () => {
    const how = await gw.stop()
    await gw.removeDataDir()
    return how
  }
  cleanups.add(stopGateway)
  const sampler = new ProcessSampler(gw.pid)
  let lg: LoadGeneratorProcess | undefined
  let floorServer: FloorServer | undefined
  try {
    printGateway(gw)
    const sources = await provisionSources(gw, tag, SOURCES)
    print(`  ${SOURCES} sources provisioned, each with its own active Ed25519 key, max_rate 100000/s`)
    const started = await LoadGeneratorProcess.start(gw.port, sources, tag)
    lg = started
    const floor = await startFloorServer()
    floorServer = floor
    return await body({
      gw,
      sampler,
      async phase(spec) {
        const bucketsBefore = await acceptLatencyBuckets(gw)
        let usage: ReturnType<ProcessSampler['endWindow']> | undefined
        let timer: NodeJS.Timeout | undefined
        const result = await started.phase(spec, () => {
          sampler.beginWindow()
          // Ended by the clock, not by the result: the drain after the window is not load.
          timer = setTimeout(() => (usage = sampler.endWindow()), spec.durationMs)
        })
        clearTimeout(timer)
        const f = figures(result, usage ?? sampler.endWindow())
        for (const line of phaseLines(f)) print(line)
        const bucketsAfter = await acceptLatencyBuckets(gw)
        const bound = (q: number) => `≤ ${bucketQuantile(bucketsBefore, bucketsAfter, q)} ms`
        print(`  inside the gateway (its /metrics histogram, arrival to 202): p50 ${bound(0.5)}, p99 ${bound(0.99)}, p99.9 ${bound(0.999)}`)
        return f
      },
      async floor(spec) {
        const result = await started.phase({ ...spec, port: floor.port }, () => undefined)
        const latency = new LatencyHistogram(result.latency)
        const f = { result, p50: latency.quantileMs(0.5), p99: latency.quantileMs(0.99) }
        for (const line of floorLines(f)) print(line)
        return f
      },
    })
  } catch (err) {
    if (gw.output.length > 0) print(`gateway output (last ${gw.output.length} lines):\n${gw.output.join('\n')}`)
    throw err
  } finally {
    floorServer?.stop()
    await lg?.close()
    sampler.stop()
    print(`gateway stopped: ${await stopGateway()}; DATA_DIR removed`)
    cleanups.delete(stopGateway)
  }
}
