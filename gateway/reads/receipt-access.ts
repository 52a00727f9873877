import type { Principal, Registry, SourceRecord } from '../../registry/index.js'
import type { Receipt } from '../../receipts/index.js'
import type { RentalRecord, Rentals } from '../../rentals/index.js'
import { ApiError, publicDelaySeconds } from '../../schemas/index.js'

/** Who reads: a request without an Authorization header is the public. */
export type Reader = { readonly kind: 'public' } | { readonly kind: 'token'; readonly principal: Principal }

/** What a reader may see of one source. */
export interface SourceAccess {
  readonly source: SourceRecord
  /** `full`: every field, no delay. `public`: redacted receipts older than the listing's delay. */
  readonly view: 'full' | 'public'
  /** Its creator or the admin: may ask for test receipts. */
  readonly operator: boolean
  /** The active rental a renter reads through (its allowance is the rental's). */
  readonly rental?: RentalRecord
  /** Public view only: receipts emitted before this instant (ms). */
  readonly cutoffMs?: number
}

/** The sources a token reads in full across sources; `undefined` sourceIds: every source (the admin). */
export interface FullScope {
  readonly sourceIds: readonly string[] | undefined
  readonly operator: boolean
}

/**
 * The access rules of the receipt reads, in one place:
 * - the admin reads every source in full, test receipts included on request;
 * - a creator reads its own sources in full (retired ones too: history stays readable),
 *   test receipts included on request;
 * - a renter reads a source in full while a rental of it is active now (a scheduled,
 *   ended or expired one gives nothing); never test receipts;
 * - anyone, with or without a token, reads a source whose listing has public_receipts,
 *   redacted and only what is older than its public_delay_seconds;
 * - everything else is the 404 of a source that does not exist.
 * Roles other than admin, creator and renter (a metrics token) are refused with 403.
 */
export class ReceiptAccess {
  readonly #registry: Registry
  readonly #rentals: Rentals
  readonly #now: () => number

  constructor(registry: Registry, rentals: Rentals, now: () => number = Date.now) {
    this.#registry = registry
    this.#rentals = rentals
    this.#now = now
  }

  /** Throws 403 for a token whose role reads no receipts. */
  static checkRole(reader: Reader): void {
    if (reader.kind === 'token' && !['admin', 'creator', 'renter'].includes(reader.principal.role)) throw new ApiError('forbidden', 'this token reads no receipts')
  }

  /** How `reader` may see `sourceId`, or undefined when not at all. */
  source(reader: Reader, sourceId: string): SourceAccess | undefined {
    const source = this.#registry.anySource(sourceId)
    if (source === undefined) return undefined
    if (reader.kind === 'token') {
      const p = reader.principal
      if (p.role === 'admin' || (p.role === 'creator' && p.subject === source.creator_id)) return { source, view: 'full', operator: true }
      if (p.role === 'renter') {
        const rental = this.activeRental(p.subject, sourceId)
        if (rental !== undefined) return { source, view: 'full', operator: false, rental }
      }
    }
    if (!source.listing.public_receipts) return undefined
    return { source, view: 'public', operator: false, cutoffMs: this.#now() - publicDelaySeconds(source.listing) * 1000 }
  }

  /** The renter's rental of the source that is active now, if any. */
  activeRental(renterId: string, sourceId: string): RentalRecord | undefined {
    const now = this.#now()
    return this.#rentals.candidates({ renter_id: renterId }).find((r) => r.source_id === sourceId && this.#rentals.isIn(r, 'active', now))
  }

  /** What a token reads in full across sources. */
  fullScope(principal: Principal): FullScope {
    if (principal.role === 'admin') return { sourceIds: undefined, operator: true }
    if (principal.role === 'creator') return { sourceIds: this.#registry.sourcesOfCreator(principal.subject).map((s) => s.source_id), operator: true }
    const now = this.#now()
    const rented = this.#rentals.candidates({ renter_id: principal.subject }).filter((r) => this.#rentals.isIn(r, 'active', now))
    return { sourceIds: [...new Set(rented.map((r) => r.source_id))], operator: false }
  }

  /** How `reader` may see `receipt`, or undefined when not at all (a test receipt: its operators only). */
  receipt(reader: Reader, receipt: Receipt): SourceAccess | undefined {
    const access = this.source(reader, receipt.source_id)
    if (access === undefined) return undefined
    if (receipt.test && !access.operator) return undefined
    if (access.view === 'public' && !(Date.parse(receipt.emitted_at) < (access.cutoffMs as number))) return undefined
    return access
  }
}
