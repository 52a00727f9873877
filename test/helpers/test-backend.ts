import { createHash, randomBytes } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import tap from 'tap'
import type { LaunchOptions } from '../../harness/gateway-launcher.js'
import { startNatsServer, type NatsCluster } from '../../harness/nats-launcher.js'

/**
 * Which backends the gateways of this test process run on: the embedded ones, or NATS
 * when the process runs with SGW_TEST_BACKEND=nats (the files under test/on-nats/ set it,
 * then import a suite of test/gateway/ or test/delivery/, so its assertions run on both).
 *
 * On NATS each data folder gets a nats-server of its own, started when a gateway first
 * starts on it and stopped when the test file ends: the key-value buckets (registry,
 * leases, rentals, webhooks) carry fixed names, so two ROLE=all gateways on one
 * nats-server would share a registry and the second one's recorder would be refused the
 * lease. A gateway restarted on the same folder finds the same server and stream.
 */
export type TestBackend = 'embedded' | 'nats'

export function testBackend(): TestBackend {
  const value = process.env['SGW_TEST_BACKEND'] ?? ''
  if (value === '' || value === 'embedded') return 'embedded'
  if (value === 'nats') return 'nats'
  throw new Error(`SGW_TEST_BACKEND=${JSON.stringify(value)}: expected embedded or nats`)
}

/**
 * For the embedded-only tail of a subtest whose flow runs on both: true on NATS, where it
 * adds a skipped subtest with `why` as its name, for the caller to return.
 */
export function embeddedOnlyFromHere(t: { skip(name: string, cb: () => void): unknown }, why: string): boolean {
  if (testBackend() !== 'nats') return false
  t.skip(`embedded backends only: ${why}`, () => undefined)
  return true
}

type GatewayOptions = Pick<LaunchOptions, 'dataDir' | 'env' | 'adminToken' | 'fileSizeLimitBytes' | 'until'>

export interface NatsLaunch {
  readonly options: GatewayOptions
  /** The data folder made here for the gateway, which its teardown removes. */
  readonly ownDataDir: string | undefined
}

const servers = new Map<string, Promise<NatsCluster>>()
const stopsAtEnd: (() => Promise<unknown>)[] = []

/** Runs `stop` when the test file ends, before the nats-servers stop (a gateway killed first logs no lost connection). */
export function beforeNatsStops(stop: () => Promise<unknown>): void {
  stopsAtEnd.push(stop)
}

/** nats-servers this test file started for its gateways: a wrapper checks its suite's gateways ran on NATS. */
export function natsServersStarted(): number {
  return servers.size
}

function serverFor(dataDir: string): Promise<NatsCluster> {
  let server = servers.get(dataDir)
  if (server === undefined) {
    if (servers.size === 0) {
      tap.teardown(async () => {
        await Promise.allSettled(stopsAtEnd.map((stop) => stop()))
        await Promise.allSettled([...servers.values()].map(async (s) => (await s).close()))
      })
    }
    server = startNatsServer()
    servers.set(dataDir, server)
  }
  return server
}

/**
 * A gateway's launch options on NATS: NATS_URL of its data folder's nats-server, a stream
 * named after the folder, ROLE=all unless the test names one, and an admin token (NATS
 * requires ADMIN_TOKEN; a test asking for a generated one, `adminToken: ''`, gets one
 * written into DATA_DIR/admin-token, where the embedded gateway would have put it).
 */
export async function natsLaunch(options: GatewayOptions): Promise<NatsLaunch> {
  const ownDataDir = options.dataDir === undefined ? await mkdtemp(join(tmpdir(), 'sgw-gateway-')) : undefined
  const dataDir = options.dataDir ?? ownDataDir!
  try {
    const nats = await serverFor(dataDir)
    const stream = `T_${createHash('sha256').update(dataDir).digest('hex').slice(0, 16)}`
    const adminToken = options.adminToken === '' ? await keptAdminToken(dataDir) : options.adminToken
    const env = { NATS_URL: nats.urls, NATS_STREAM: stream, ROLE: 'all', ...options.env }
    return { options: { ...options, dataDir, env, ...(adminToken !== undefined && { adminToken }) }, ownDataDir }
  } catch (err) {
    if (ownDataDir !== undefined) await rm(ownDataDir, { recursive: true, force: true })
    throw err
  }
}

async function keptAdminToken(dataDir: string): Promise<string> {
  const file = join(dataDir, 'admin-token')
  const kept = await readFile(file, 'utf8').catch(() => undefined)
  if (kept !== undefined) return kept.trim()
  const token = `sgw_admin_${randomBytes(32).toString('base64url')}`
  await writeFile(file, `${token}\n`, { mode: 0o600 })
  return token
}
