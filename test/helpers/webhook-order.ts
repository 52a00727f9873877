import { RUN_MAX_EVENTS } from '../../delivery/webhooks/run-bounds.js'

/** One delivery as a receiver got it: what the ordering rule compares. */
export interface Arrival {
  /** The webhook-id header. */
  readonly id: string
  readonly body: string
  readonly eventId: string
}

/**
 * The at-least-once, in-order rule for one rental: the first arrivals are exactly
 * `expected` (event ids, in order); repeats come in runs, each run exactly the last events
 * that arrived before it, in the same order, at most RUN_MAX_EVENTS (the run of events a
 * crashed or cut-off process delivered after its last state write), with the same
 * webhook-id and body. Returns the problems found; `runs` gets the length of each run.
 */
export function orderProblems(deliveries: readonly Arrival[], expected: readonly string[], runs: number[] = []): string[] {
  const problems: string[] = []
  const first = new Map<string, Arrival>()
  const firsts: string[] = []
  let run: string[] | undefined
  const endRun = () => {
    if (run === undefined) return
    runs.push(run.length)
    const suffix = firsts.slice(Math.max(0, firsts.length - run.length))
    if (run.length > RUN_MAX_EVENTS || suffix.join(',') !== run.join(',')) problems.push(`repeats ${run.join(',')} are not the last ${run.length} events that arrived before them (at most ${RUN_MAX_EVENTS})`)
    run = undefined
  }
  for (const d of deliveries) {
    const seen = first.get(d.eventId)
    if (seen === undefined) {
      endRun()
      first.set(d.eventId, d)
      firsts.push(d.eventId)
      continue
    }
    ;(run ??= []).push(d.eventId)
    if (seen.id !== d.id) problems.push(`event ${d.eventId} repeated with webhook-id ${d.id}, first ${seen.id}`)
    if (seen.body !== d.body) problems.push(`event ${d.eventId} repeated with another body`)
  }
  endRun()
  if (firsts.join(',') !== expected.join(',')) problems.push(`first arrivals ${firsts.join(',')} are not ${expected.join(',')}`)
  return problems
}
