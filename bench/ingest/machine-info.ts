import { readFileSync } from 'node:fs'
import { cpus, release, totalmem, version } from 'node:os'

/**
 * What a reader needs to compare two runs: the machine, the kernel, the runtime and
 * the versions of the three native pieces on the hot path (uWS, piscina,
 * sodium-native), plus the two limits that decide whether the overload phase can run.
 */

const ROOT = new URL('../../../', import.meta.url)

function packageVersion(name: string): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL(`node_modules/${name}/package.json`, ROOT), 'utf8')) as { name?: string; version?: string }
    // uWebSockets.js is an npm alias (of @trufflesuite/uws-js-unofficial): show what is really installed.
    return pkg.name !== undefined && pkg.name !== name ? `${pkg.version} (${pkg.name})` : (pkg.version ?? 'unknown')
  } catch {
    return 'not installed'
  }
}

/** The soft and hard "Max open files" of this process, which children inherit. */
export function openFileLimit(): { soft: number; hard: number } | undefined {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files'))
    const [soft, hard] = (line ?? '').replace('Max open files', '').trim().split(/\s+/)
    return { soft: Number(soft), hard: Number(hard) }
  } catch {
    return undefined
  }
}

/** Filesystem type under `path` (the journal's fsync cost depends on it: tmpfs makes it free). */
export function filesystemOf(path: string): string {
  try {
    let best = { mount: '', type: 'unknown', device: '' }
    for (const line of readFileSync('/proc/mounts', 'utf8').split('\n')) {
      const [device, mount, type] = line.split(' ')
      if (device === undefined || mount === undefined || type === undefined) continue
      if ((path === mount || path.startsWith(mount.endsWith('/') ? mount : `${mount}/`)) && mount.length >= best.mount.length) best = { mount, type, device }
    }
    return `${best.type} (${best.device} on ${best.mount})`
  } catch {
    return 'unknown'
  }
}

export function machineLines(): string[] {
  const cpu = cpus()
  const limit = openFileLimit()
  return [
    `machine: ${cpu[0]?.model ?? 'unknown cpu'}, ${cpu.length} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM`,
    `kernel: Linux ${release()} ${version()}`,
    `open files limit: ${limit === undefined ? 'unknown' : `soft ${limit.soft}, hard ${limit.hard}`}`,
    `versions: node ${process.versions.node} (openssl ${process.versions.openssl}), uWebSockets.js ${packageVersion('uWebSockets.js')}, piscina ${packageVersion('piscina')}, sodium-native ${packageVersion('sodium-native')}`,
  ]
}
