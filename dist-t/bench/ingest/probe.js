import { withSession, print } from './session.js'
import { GATEWAY_ENV } from './options.js'
const rates = (process.env.RATES ?? '1000,3000,5000,7000').split(',').map(Number)
await withSession(GATEWAY_ENV, async (s) => {
  await s.phase({ name: 'warm', mode: 'closed', connections: 256, durationMs: 3000, budget: 40000 })
  for (const r of rates) {
    await s.phase({ name: `open ${r}`, mode: 'open', connections: 256, durationMs: 8000, ratePerS: r, budget: Math.ceil(r * 8) + 256 })
  }
  if (process.env.DUMP) (await import('node:fs')).writeFileSync(process.env.DUMP, s.gw.output().join('\n'))
})
