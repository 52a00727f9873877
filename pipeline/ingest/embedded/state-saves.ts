/**
 * Saves the ingest state now and then while the gateway runs (IngestPipeline.saveState),
 * so that a start after a crash (kill -9, a power cut) takes the last saved state over
 * and reads from the log only the records since, instead of the whole dedup window.
 *
 * A save every `intervalMs`, but never for more than `maxShare` of the time: after a
 * save that took d ms the next waits at least d / maxShare. A large state on a slow
 * disk is then saved less often instead of taking the disk from the journal's fsyncs,
 * or the event loop from the requests, for long.
 */
export interface StateSavesOptions<T> {
  readonly intervalMs: number
  readonly maxShare: number
  /** One save; resolves undefined when there was nothing new to save. */
  readonly save: () => Promise<T | undefined>
  readonly onSaved: (saved: T, ms: number) => void
  /** A failed save is reported and the next one tried as usual: the log still holds everything. */
  readonly onFailed: (err: unknown) => void
}

export interface StateSaves {
  /** No save starts after this; resolves once a save under way has finished. */
  stop(): Promise<void>
}

export function scheduleStateSaves<T>(options: StateSavesOptions<T>): StateSaves {
  let timer: NodeJS.Timeout | undefined
  let running: Promise<void> = Promise.resolve()
  let stopped = false

  const next = (delayMs: number) => {
    if (!stopped) timer = setTimeout(run, delayMs).unref()
  }
  const run = () => {
    const started = performance.now()
    running = options
      .save()
      .then(
        (saved) => {
          const ms = performance.now() - started
          // Scheduled first: a report that throws must not end the saves.
          next(Math.max(options.intervalMs, ms / options.maxShare))
          if (saved !== undefined) options.onSaved(saved, ms)
        },
        (err: unknown) => {
          next(options.intervalMs)
          options.onFailed(err)
        },
      )
      .catch(() => undefined)
  }
  next(options.intervalMs)
  return {
    async stop() {
      stopped = true
      clearTimeout(timer)
      await running
    },
  }
}
