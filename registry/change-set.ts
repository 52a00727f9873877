import type { DisputeRecord, RetiredKey } from './records.js'
import type { OwnerIndex } from './owner-index.js'
import type { RegistryChange } from './registry-store.js'

/** The change being made: what to record, and how to undo it in memory if recording fails. */
export interface PendingChange extends RegistryChange {
  readonly retiredKeys: RetiredKey[]
  readonly disputes: DisputeRecord[]
  readonly undo: Array<() => void>
}

/**
 * Runs the registry's changes one at a time and records each before it resolves: only
 * the records it touched, so a change costs the same however large the registry is.
 * A change notes what it touches through `current`, `put`, `group` and `touch`; if
 * recording fails, everything it noted is put back as it was, so memory never claims
 * what disk does not hold.
 */
export class ChangeSet {
  readonly #record: (change: RegistryChange) => Promise<void>
  #chain: Promise<unknown> = Promise.resolve()
  /** Set while a change runs. */
  #pending: PendingChange | undefined
  readonly #inFlight = new Map<string, Promise<void>>()

  /** `record` durably records one change (the registry store's append). */
  constructor(record: (change: RegistryChange) => Promise<void>) {
    this.#record = record
  }

  run<T>(change: () => T): Promise<T> {
    const run = async () => {
      const pending: PendingChange = { tokens: [], agents: [], sources: [], keys: [], droppedKeys: [], droppedTokens: [], retiredKeys: [], disputes: [], undo: [] }
      this.#pending = pending
      let result: T
      try {
        result = change()
      } catch (err) {
        undo(pending)
        throw err
      } finally {
        this.#pending = undefined
      }
      if (pending.undo.length === 0) return result
      const { undo: _, ...recorded } = pending
      try {
        await this.#record(recorded)
      } catch (err) {
        undo(pending)
        throw err
      }
      return result
    }
    const next = this.#chain.then(run, run)
    this.#chain = next.catch(() => undefined)
    return next
  }

  /**
   * A change that many requests may ask for at once (flag a source, mark a key tested):
   * callers that ask while it is in flight share it, so a flood of 429s or of test
   * signals writes the registry file once, not once per request.
   */
  once(what: string, change: () => void): Promise<void> {
    const running = this.#inFlight.get(what)
    if (running !== undefined) return running
    const done = this.run(change).finally(() => this.#inFlight.delete(what))
    this.#inFlight.set(what, done)
    return done
  }

  /** The change under way; state changes only inside `run`. */
  get current(): PendingChange {
    if (this.#pending === undefined) throw new Error('registry changed outside a change')
    return this.#pending
  }

  /** Adds a new entry to `map`, removed again by undo. */
  put<V>(map: Map<string, V>, id: string, value: V): void {
    map.set(id, value)
    this.current.undo.push(() => map.delete(id))
  }

  /** Files a new record's id under its owner, removed again by undo. */
  group(index: OwnerIndex, owner: string, id: string): void {
    index.add(owner, id)
    this.current.undo.push(() => index.delete(owner, id))
  }

  /**
   * Notes that `record` is about to change in place (in place, because requests in
   * flight hold it and must see a revocation): recorded whole after the change, and
   * put back field by field by undo.
   */
  touch<R extends object>(record: R, list: R[]): void {
    if (list.includes(record)) return
    list.push(record)
    const before = { ...record }
    this.current.undo.push(() => Object.assign(record, before))
  }

  /** Waits for changes in flight. */
  async settle(): Promise<void> {
    await this.#chain
  }
}

/** Puts memory back as it was before a change that could not be recorded, newest step first. */
function undo(pending: PendingChange): void {
  for (let i = pending.undo.length - 1; i >= 0; i--) (pending.undo[i] as () => void)()
}
