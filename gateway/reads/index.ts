/** Receipt reads: lists, one receipt, exports, their access rules, allowances and the usage meter. */
export { ReceiptAccess, type Reader, type SourceAccess } from './receipt-access.js'
export { MemoryReadRateLimiter } from './read-rate-memory.js'
export type { ReadRateLimiter } from './read-rate-limiter.js'
export { ExportSlots } from './export-slots.js'
export { KvUsageMeter, USAGE_MAX_KEYS } from './usage-kv.js'
export type { UsageCaller, UsageMeter, UsageMonth } from './usage-meter.js'
export { PUBLIC_REDACTED_FIELDS } from './receipt-view.js'
export { registerReadRoutes, type ReadOptions } from './register.js'
