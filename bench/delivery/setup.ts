import { apiRequest } from '../../harness/api-request.js'
import { creatorKeyFromSeed, type CreatorKey } from '../../harness/signed-push.js'
import type { BenchGateway } from '../ingest/gateway-process.js'
import { provisionSources } from '../ingest/provision.js'

/**
 * The delivery benchmark's world, built through the public API as an operator would:
 * sources (the ingest bench's provisioning), one renter token per rental, and rentals
 * spread round-robin over the sources, so each source's signals fan out to
 * rentals / sources streams.
 */

export interface BenchSource {
  readonly sourceId: string
  readonly keyId: string
  readonly key: CreatorKey
}

export interface BenchRental {
  readonly rentalId: string
  readonly sourceId: string
  readonly renterToken: string
}

export async function benchSources(gw: BenchGateway, tag: string, count: number): Promise<BenchSource[]> {
  const sources = await provisionSources(gw, tag, count)
  return sources.map((s) => ({ sourceId: s.sourceId, keyId: s.keyId, key: creatorKeyFromSeed(Buffer.from(s.seedBase64, 'base64')) }))
}

export async function benchRental(gw: BenchGateway, tag: string, sourceId: string): Promise<BenchRental> {
  const subject = `renter:bench_${tag}`
  const token = await apiRequest(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject } })
  if (token.status !== 201) throw new Error(`renter token: ${token.status} ${JSON.stringify(token.body)}`)
  const rental = await apiRequest(gw.url, 'POST', '/v1/admin/rentals', { token: gw.adminToken, body: { renter_id: subject, source_id: sourceId } })
  if (rental.status !== 201) throw new Error(`rental: ${rental.status} ${JSON.stringify(rental.body)}`)
  return { rentalId: rental.body.data.rental_id as string, sourceId, renterToken: token.body.data.token as string }
}

/** `count` rentals, rental i on source i mod sources. */
export async function benchRentals(gw: BenchGateway, tag: string, sources: readonly BenchSource[], count: number): Promise<BenchRental[]> {
  const rentals: BenchRental[] = []
  for (let i = 0; i < count; i++) rentals.push(await benchRental(gw, `${tag}_${i}`, sources[i % sources.length]!.sourceId))
  return rentals
}
