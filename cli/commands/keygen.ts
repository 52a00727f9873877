import type { Command } from 'commander'
import { writeNewKeyFile } from '../key-file.js'
import { fields, printResult } from '../output.js'
import { settingsOf } from '../settings.js'

/** `sgw keygen`: a source signing key, made locally; nothing is sent. */
export function registerKeygen(program: Command): void {
  program
    .command('keygen')
    .description('make an Ed25519 source key: the private key to a file (mode 600), the public key printed for `sgw key add`')
    .requiredOption('--out <file>', 'where to write the private key (PKCS#8 PEM); never overwritten')
    .action(async (o: { out: string }, cmd: Command) => {
      const s = settingsOf(cmd)
      const key = await writeNewKeyFile(o.out)
      const result = { key_file: o.out, public_key: key.publicKey }
      printResult(s, result, () => fields(result))
    })
}
