import type { Migration } from '../schema-migrations.js'
import { receiptsTable } from './001-receipts.js'
import { receiptLookups } from './002-receipt-lookups.js'
import { fsyncInserts } from './003-fsync-inserts.js'
import { receiptLogTables } from './004-receipt-log.js'

/** Every migration this code knows, in version order. A new one gets the next version; none is ever edited once released. */
export const MIGRATIONS: readonly Migration[] = [receiptsTable, receiptLookups, fsyncInserts, receiptLogTables]
