import { spawn } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { repoPath } from './repo-root.js'

/**
 * A document's shell walk-through as a test runs it: the one `sh` code block between
 * `<!-- <name>:begin -->` and `<!-- <name>:end -->` in a file of the repository, run in
 * bash from the repository's root as a reader pastes it.
 */

/** The commands of the block named `name` in the repository file `file`. */
export async function shellBlock(file: string, name: string): Promise<string> {
  const text = await readFile(repoPath(file), 'utf8')
  const block = new RegExp(`<!-- ${name}:begin -->\\n([\\s\\S]*?)<!-- ${name}:end -->`).exec(text)?.[1]
  if (block === undefined) throw new Error(`${file} has no <!-- ${name}:begin --> ... <!-- ${name}:end --> block`)
  const fences = [...block.matchAll(/^```(?:sh|bash)\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string)
  if (fences.length !== 1) throw new Error(`the ${name} block of ${file} must hold one sh code block, not ${fences.length}`)
  return fences[0] as string
}

export interface BashRun {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/**
 * The commands in `bash <options> -c` from the repository's root, with only `env` set.
 * bash leads a process group of its own, killed whole when bash ends or the time is up:
 * a command a block started in the background and a failing step left running would
 * otherwise keep the output pipes open, and the test waiting.
 */
export function runInBash(commands: string, env: Record<string, string>, options: { timeoutMs: number; bashOptions?: string[] }): Promise<BashRun> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [...(options.bashOptions ?? []), '-c', commands], { cwd: repoPath(), env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c: Buffer) => (stdout += c))
    child.stderr.on('data', (c: Buffer) => (stderr += c))
    const killGroup = () => {
      try {
        process.kill(-(child.pid as number), 'SIGKILL')
      } catch {
        // The group is already gone.
      }
    }
    const timer = setTimeout(() => {
      stderr += `\n(killed after ${options.timeoutMs} ms)`
      killGroup()
    }, options.timeoutMs)
    let exitCode = 1
    child.on('error', reject)
    child.on('exit', (code) => {
      exitCode = code ?? 1
      clearTimeout(timer)
      killGroup()
    })
    child.on('close', () => resolve({ code: exitCode, stdout, stderr }))
  })
}
