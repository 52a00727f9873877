import type { MigrationReport } from './migration.js'

/** What the move copied, in counts, one line each, as the command prints it. */
export function formatReport(r: MigrationReport): string {
  const lines = ['moved into the cluster:']
  for (const [name, c] of Object.entries(r.buckets)) lines.push(`  bucket ${name}: ${c.copied} entries copied${c.present > 0 ? `, ${c.present} there already` : ''}${c.left > 0 ? `, ${c.left} left behind` : ''}`)
  lines.push(`  signal index: ${r.journal.signals} accepted signals${r.journal.signalsPresent > 0 ? `, ${r.journal.signalsPresent} there already` : ''} (journal up to seq ${r.journal.lastSeq})`)
  lines.push(`  nonces: ${r.journal.nonces} claimed (signals accepted within the nonce window)`)
  lines.push(`  receipts: ${r.receipts.held} in the data folder, ${r.receipts.rows} rows loaded, ${r.receipts.receipts} in the cluster`)
  const log = r.receiptLog
  lines.push(`  receipt log: ${log.leaves} leaves in the cluster (rows written: ${log.rows.receipt_log_entries} leaves, ${log.rows.signed_requests} signed requests, ${log.rows.receipt_log_checkpoints} checkpoints); the cluster signs on from the checkpoint of size ${log.checkpointSize}`)
  lines.push(`  signal stream: its first record will be seq ${r.streamFirstSeq}`)
  if (r.adminTokenFile !== undefined) lines.push(`note: ADMIN_TOKEN is not the token in ${r.adminTokenFile}: admin clients of the embedded deployment need the cluster's token`)
  return `${lines.join('\n')}\n`
}
