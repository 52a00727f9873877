import { Connection, type ConnectionHandler, type ParsedResponse } from './http-client.js'
import { PhaseStats } from './phase-stats.js'
import type { RequestPool } from './presign.js'
import type { PhaseSpec } from './protocol.js'

/**
 * One timed phase of load. Closed mode: every connection sends its next request as
 * soon as the previous one is answered (the peak rate). Open mode: requests are
 * scheduled at fixed intervals whatever the server does, and latency runs from the
 * scheduled time, not the send time, so a stalled server cannot hide its stall by
 * slowing the client down (coordinated omission).
 */

/** Connections opened at once; a bigger burst overflows the listen backlog and costs a 1 s SYN retry. */
const CONNECT_WAVE = 200
const CONNECT_TIMEOUT_MS = 20_000
/** After the window, how long in-flight requests may take before the connections are cut. */
const CLOSED_DRAIN_MS = 3_000
/** Open mode keeps measuring scheduled requests this long after the last one was due. */
const OPEN_DRAIN_MS = 5_000
/** Timer period of the open-loop scheduler; sends due in between go out on the next tick or response. */
const TICK_MS = 1

export interface PhaseOutcome {
  readonly stats: PhaseStats
  readonly windowMs: number
  readonly loadgenCpuMs: number
}

class PhaseDriver implements ConnectionHandler {
  readonly stats = new PhaseStats()
  readonly #spec: PhaseSpec
  readonly #pool: RequestPool
  readonly #connections: Connection[] = []
  /** Connections with nothing in flight, waiting for work. */
  readonly #idle: Connection[] = []
  #running = false
  #stopping = false
  #inFlight = 0
  /** performance.now() at the start of the window: doubles, not hrtime bigints, so timing allocates nothing. */
  #t0 = 0
  #windowMs = 0
  #onSettled: (() => void) | undefined
  #onIdleChange: (() => void) | undefined
  // Open mode: offsets (ms from t0) of requests that are due and not yet sent.
  #intervalMs = 0
  #scheduled = 0
  #total = 0
  #backlog = new Float64Array(0)
  #head = 0
  #tail = 0
  #firstConnectError: string | undefined

  constructor(spec: PhaseSpec, pool: RequestPool) {
    this.#spec = spec
    this.#pool = pool
  }

  get firstConnectError(): string | undefined {
    return this.#firstConnectError
  }

  /** Opens the connections in waves before the clock starts; resolves with how many are up. */
  async connect(port: number): Promise<number> {
    const deadline = Date.now() + CONNECT_TIMEOUT_MS
    while (this.#connections.length < this.#spec.connections && Date.now() < deadline) {
      const wave = Math.min(CONNECT_WAVE, this.#spec.connections - this.#connections.length)
      for (let i = 0; i < wave; i++) this.#connections.push(new Connection(port, this))
      await this.#until(() => this.#idle.length >= this.#connections.length, deadline)
    }
    return this.#idle.length
  }

  /** Runs the phase; `started` is called when the clock starts. */
  async run(started: () => void): Promise<number> {
    this.#running = true
    this.#t0 = performance.now()
    this.stats.inWindow = true
    started()
    if (this.#spec.mode === 'closed') {
      for (const conn of this.#idle.splice(0)) this.#sendNext(conn)
      await this.#until(() => this.#stopping, Date.now() + this.#spec.durationMs)
      this.#endWindow()
      await this.#until(() => this.#inFlight === 0, Date.now() + CLOSED_DRAIN_MS)
    } else {
      const rate = this.#spec.ratePerS ?? 1
      this.#intervalMs = 1000 / rate
      this.#total = Math.max(1, Math.round((rate * this.#spec.durationMs) / 1000))
      this.#backlog = new Float64Array(this.#total)
      const timer = setInterval(() => this.#tick(), TICK_MS)
      const deadline = Date.now() + this.#spec.durationMs + OPEN_DRAIN_MS
      await this.#until(() => this.stats.exhausted || (this.#scheduled === this.#total && this.#head === this.#tail && this.#inFlight === 0), deadline)
      clearInterval(timer)
      this.#windowMs = Math.min(this.#spec.durationMs, performance.now() - this.#t0)
      this.stats.unanswered = this.#total - this.#scheduled + (this.#tail - this.#head) + this.#inFlight
      this.stats.inWindow = false
      this.#stopping = true
    }
    for (const conn of this.#connections) conn.stop()
    return this.#windowMs
  }

  ready(conn: Connection): void {
    if (this.#stopping) return
    if (this.#running && this.#spec.mode === 'closed') return this.#sendNext(conn)
    this.#idle.push(conn)
    if (this.#running) this.#tick()
    else this.#onIdleChange?.()
  }

  response(_conn: Connection, res: ParsedResponse, request: Buffer, startedAt: number): void {
    this.#inFlight--
    if (this.stats.record(res, startedAt, performance.now())) {
      this.#pool.giveBack(request)
      this.stats.recycled++
    }
    if (this.#stopping) this.#onSettled?.()
  }

  dropped(_conn: Connection, _request: Buffer): void {
    this.#inFlight--
    if (this.stats.inWindow) this.stats.dropped++
    if (this.#stopping) this.#onSettled?.()
  }

  connectError(_conn: Connection, err: Error): void {
    this.#firstConnectError ??= err.message
    if (this.stats.inWindow) this.stats.connectErrors++
  }

  #sendNext(conn: Connection): void {
    // An idle connection the server closed is reopening: its ready() call comes later.
    if (this.#stopping || !conn.ready) return
    const request = this.#pool.take()
    if (request === undefined) {
      this.stats.exhausted = true
      this.#endWindow()
      return
    }
    this.#inFlight++
    this.stats.sent++
    conn.send(request, performance.now())
  }

  /** Closed mode: stop counting and stop sending; what is in flight may still finish. */
  #endWindow(): void {
    if (this.#stopping) return
    this.#windowMs = performance.now() - this.#t0
    this.stats.inWindow = false
    this.#stopping = true
    this.#onSettled?.()
  }

  /** Open mode: moves requests that have come due into the backlog, then hands them to idle connections. */
  #tick(): void {
    if (this.#stopping || this.stats.exhausted) return
    const now = performance.now() - this.#t0
    while (this.#scheduled < this.#total && this.#scheduled * this.#intervalMs <= now) {
      this.#backlog[this.#tail++] = this.#scheduled * this.#intervalMs
      this.#scheduled++
    }
    while (this.#head < this.#tail && this.#idle.length > 0) {
      const conn = this.#idle.pop() as Connection
      // Closed while idle (it reconnects and calls ready() again), or listed twice.
      if (!conn.ready) continue
      const request = this.#pool.take()
      if (request === undefined) {
        this.stats.exhausted = true
        this.#onSettled?.()
        return
      }
      const due = this.#t0 + (this.#backlog[this.#head++] as number)
      this.#inFlight++
      this.stats.sent++
      conn.send(request, due)
    }
    this.#onSettled?.()
  }

  /** Resolves once `done()` holds (checked on every event that can change it) or at `deadline`. */
  #until(done: () => boolean, deadline: number): Promise<void> {
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer)
        this.#onSettled = undefined
        this.#onIdleChange = undefined
        resolve()
      }
      const check = () => done() && finish()
      const timer = setTimeout(finish, Math.max(0, deadline - Date.now()))
      this.#onSettled = check
      this.#onIdleChange = check
      check()
    })
  }
}

/** Connects, runs one phase against `port` with requests from `pool`, and closes every connection. */
export async function runPhase(port: number, pool: RequestPool, spec: PhaseSpec, started: () => void): Promise<PhaseOutcome> {
  const driver = new PhaseDriver(spec, pool)
  const up = await driver.connect(port)
  if (up < spec.connections) {
    throw new Error(`only ${up} of ${spec.connections} connections opened (${driver.firstConnectError ?? 'timed out'}); check ulimit -n`)
  }
  const cpu = process.cpuUsage()
  const windowMs = await driver.run(started)
  const used = process.cpuUsage(cpu)
  return { stats: driver.stats, windowMs, loadgenCpuMs: (used.user + used.system) / 1000 }
}
