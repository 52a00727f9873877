import type { Command } from 'commander'
import { PushError, SourceClient } from '@signal-ingest-gateway/sdk'
import { CliError, EXIT, usageError } from '../exit-codes.js'
import { enc, gatewayCall } from '../gateway-call.js'
import { readKeyFile, writeNewKeyFile } from '../key-file.js'
import { nonNegativeInt } from '../option-parsers.js'
import { fields, note, printResult } from '../output.js'
import { settingsOf, type Settings } from '../settings.js'

/** A token address each chain takes, for the rotation's test signal. */
const TEST_TOKEN: Record<string, string> = { solana: 'So11111111111111111111111111111111111111112' }
const EVM_TEST_TOKEN = '0x0000000000000000000000000000000000000001'

/** `sgw key add|promote|revoke|rotate`: a source's signing keys (creator token). */
export function registerKey(program: Command): void {
  const key = program.command('key').description("a source's signing keys (creator token)")
  key
    .command('add')
    .description('register a public key as pending (push a test signal with it, then promote it)')
    .requiredOption('--source-id <id>')
    .option('--key <file>', 'the private key file: its public key is registered')
    .option('--public-key <key>', 'or the public key itself: base64 or base64url of 32 bytes, or a PEM public key as @file')
    .action(async (o: { sourceId: string; key?: string; publicKey?: string }, cmd: Command) => {
      const s = settingsOf(cmd)
      if ((o.key === undefined) === (o.publicKey === undefined)) throw usageError('give one of --key <private key file> or --public-key <key>')
      const publicKey = o.key !== undefined ? (await readKeyFile(o.key)).publicKey : await publicKeyText(o.publicKey as string)
      const { data } = await gatewayCall(s, 'POST', `/v1/byo/sources/${enc(o.sourceId)}/keys`, { body: { public_key: publicKey } })
      printResult(s, data, () => fields(data))
    })
  key
    .command('promote')
    .description('make a tested pending key active; the active key moves to grace')
    .requiredOption('--source-id <id>')
    .requiredOption('--key-id <id>')
    .action(async (o: { sourceId: string; keyId: string }, cmd: Command) => {
      const s = settingsOf(cmd)
      const { data } = await gatewayCall(s, 'POST', `/v1/byo/sources/${enc(o.sourceId)}/keys/${enc(o.keyId)}/promote`, { idempotent: true })
      printResult(s, data, () => fields(data))
    })
  key
    .command('revoke')
    .description('refuse a key from now on (forward only)')
    .requiredOption('--source-id <id>')
    .requiredOption('--key-id <id>')
    .option('--reason <reason>', 'rotation or compromise')
    .action(async (o: { sourceId: string; keyId: string; reason?: string }, cmd: Command) => {
      const s = settingsOf(cmd)
      const data = await revoke(s, o.sourceId, o.keyId, o.reason)
      printResult(s, data, () => fields(data))
    })
  key
    .command('rotate')
    .description('the whole rotation: a new key, its test signal, promotion (the old key to grace), and the old key revoked later')
    .requiredOption('--source-id <id>')
    .requiredOption('--new-key <file>', 'the new private key: made here (mode 600) unless the file exists, then read')
    .option('--revoke-after <seconds>', 'wait this long for your servers to move to the new key, then revoke the old one (reason rotation); without it the old key stays in grace and the command to revoke it is printed', nonNegativeInt)
    .action(async (o: { sourceId: string; newKey: string; revokeAfter?: number }, cmd: Command) => {
      const s = settingsOf(cmd)
      const result = await rotate(s, o.sourceId, o.newKey, o.revokeAfter)
      printResult(s, result, () => fields(result))
    })
}

async function publicKeyText(value: string): Promise<string> {
  if (!value.startsWith('@')) return value
  const { readFileSync } = await import('node:fs')
  return readFileSync(value.slice(1), 'utf8')
}

async function revoke(s: Settings, sourceId: string, keyId: string, reason: string | undefined) {
  return (await gatewayCall(s, 'POST', `/v1/byo/sources/${enc(sourceId)}/keys/${enc(keyId)}/revoke`, { ...(reason === undefined ? {} : { body: { reason } }), idempotent: true })).data
}

/**
 * Key rotation as creators.md lays it out: register the new key (pending), push a test
 * signal signed with it (a valid signal of the source's own manifest: its first severity
 * and a token of its first chain), promote it (the active key moves to grace and is still
 * accepted, so servers switch over), then revoke the old key with reason `rotation` once
 * the servers use the new one. A failed step stops the rotation where it is; what was done
 * stays done (a pending key can be revoked, a promoted one is the source's key).
 */
async function rotate(s: Settings, sourceId: string, keyFile: string, revokeAfterS: number | undefined) {
  const { existsSync } = await import('node:fs')
  const source = (await gatewayCall(s, 'GET', `/v1/byo/sources/${enc(sourceId)}`)).data
  const keys = (await gatewayCall(s, 'GET', `/v1/byo/sources/${enc(sourceId)}/keys`)).data as { key_id: string; state: string }[]
  const old = keys.find((k) => k.state === 'active')
  const key = existsSync(keyFile) ? await readKeyFile(keyFile) : await writeNewKeyFile(keyFile)
  const added = (await gatewayCall(s, 'POST', `/v1/byo/sources/${enc(sourceId)}/keys`, { body: { public_key: key.publicKey } })).data
  note(`registered ${added.key_id} (pending)`)
  const chain = source.manifest.coverage.chains[0] as string
  const client = new SourceClient({ gatewayUrl: s.url, sourceId, keyId: added.key_id, key, retry: { deadlineMs: 30_000 } })
  let test
  try {
    test = await client.push({ signal_id: `sgw_rotate_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`, ts: new Date().toISOString(), token: TEST_TOKEN[chain] ?? EVM_TEST_TOKEN, severity: source.manifest.severity_levels[0] })
  } catch (err) {
    if (!(err instanceof PushError)) throw err
    throw new CliError(err.code === 'push_refused' ? EXIT.refused : EXIT.unreachable, `the test signal of ${added.key_id} failed (the key stays pending): ${err.message}`)
  }
  note(`test signal accepted (test: ${test.test === true})`)
  await gatewayCall(s, 'POST', `/v1/byo/sources/${enc(sourceId)}/keys/${enc(added.key_id)}/promote`, { idempotent: true })
  note(`promoted ${added.key_id}${old === undefined ? '' : `; ${old.key_id} is in grace`}`)
  let oldState = old === undefined ? null : 'grace'
  if (old !== undefined && revokeAfterS !== undefined) {
    note(`revoking ${old.key_id} in ${revokeAfterS} s`)
    await new Promise((resolve) => setTimeout(resolve, revokeAfterS * 1000))
    oldState = (await revoke(s, sourceId, old.key_id, 'rotation')).state
  } else if (old !== undefined) {
    note(`once every server signs with ${keyFile}: sgw key revoke --source-id ${sourceId} --key-id ${old.key_id} --reason rotation`)
  }
  return { source_id: sourceId, new_key_id: added.key_id, key_file: keyFile, old_key_id: old?.key_id ?? null, old_key_state: oldState }
}
