import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'

/**
 * Everything the gateway's registry bucket holds, keys and values, as latin1 text, to look
 * for a secret in it: the files DATA_DIR/kv/registry/snapshot.kv and changes.kv on the
 * embedded backend (whichever holds it), the NATS KV bucket `registry` on NATS.
 */
export async function storedRegistryText(gw: LaunchedGateway): Promise<string> {
  const natsUrl = gw.env['NATS_URL']
  if (natsUrl === undefined) {
    const read = (name: string) => readFile(join(gw.dataDir, 'kv', 'registry', name), 'latin1').catch(() => '')
    return (await read('snapshot.kv')) + (await read('changes.kv'))
  }
  const [{ connect }, { Kvm }] = await Promise.all([import('@nats-io/transport-node'), import('@nats-io/kv')])
  const nc = await connect({ servers: natsUrl.split(',') })
  try {
    const kv = await new Kvm(nc).open('registry')
    const parts: string[] = []
    for await (const key of await kv.keys()) {
      const entry = await kv.get(key)
      parts.push(key, Buffer.from(entry?.value ?? []).toString('latin1'))
    }
    return parts.join('\n')
  } finally {
    await nc.close()
  }
}
