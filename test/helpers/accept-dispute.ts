import { randomBytes } from 'node:crypto'
import { encodePlacement, placementDedupId, type SignalLog } from '../../pipeline/index.js'
import type { DisputeRecord, Registry } from '../../registry/index.js'

/** As the accept route does: the dispute's placement appended to the log under its source, then the dispute recorded after it. */
export async function acceptDispute(log: SignalLog, registry: Registry, sourceId: string, disputeId: string): Promise<DisputeRecord> {
  const { seq } = await log.append(placementDedupId(sourceId, disputeId, randomBytes(4).toString('hex')), encodePlacement(sourceId, disputeId), { sourceId })
  return registry.resolveDispute(sourceId, disputeId, 'accepted', null, seq)
}
