import { availableParallelism } from 'node:os';
import { measureVerifyRate } from '../verify-ceiling.js';
import { startGateway } from './gateway-process.js';
import { LoadGeneratorProcess } from './load-generator-process.js';
import { filesystemOf } from './machine-info.js';
import { CEILING_MS, SOURCES } from './options.js';
import { ProcessSampler } from './process-sampler.js';
import { provisionSources } from './provision.js';
import { figures, formatRate, phaseLines } from './report.js';
import { acceptLatencyBuckets, bucketQuantile } from './gateway-metrics.js';
/** One gateway with its sources and a load generator, and the phases run against it. */
export const print = (line = '') => process.stdout.write(`${line}\n`);
/** Makes every run's signal ids distinct, should two runs ever share a DATA_DIR. */
const tag = Date.now().toString(36);
/** Live gateways, so that Ctrl-C still stops them and removes their DATA_DIR. */
const cleanups = new Set();
process.once('SIGINT', () => {
    void Promise.allSettled([...cleanups].map((fn) => fn())).then(() => process.exit(130));
});
/** Single-core sodium-native verifies/s, on this (otherwise idle) orchestrator thread. */
export async function ceiling(label) {
    const rate = await measureVerifyRate('sodium-native', CEILING_MS);
    print(`verify ceiling (${label}): sodium-native ${formatRate(rate)} verifies/s on one core (${CEILING_MS / 1000} s, this process)`);
    return rate;
}
function printGateway(gw) {
    const c = gw.config;
    const threads = c.VERIFY_THREADS === 0 ? `0 (= ${Math.max(1, availableParallelism() - 1)}, cores less one)` : String(c.VERIFY_THREADS);
    print(`gateway pid ${gw.pid} on ${gw.url}: VERIFY_THREADS ${threads}, VERIFY_BATCH ${c.VERIFY_BATCH}, VERIFY_QUEUE_LIMIT ${c.VERIFY_QUEUE_LIMIT}, JOURNAL_FSYNC ${c.JOURNAL_FSYNC}, LOG_LEVEL ${c.LOG_LEVEL}`);
    print(`  DATA_DIR ${gw.dataDir} on ${filesystemOf(gw.dataDir)}`);
}
/** Gateway + sources + load generator for the duration of `body`, torn down whatever happens. */
export async function withSession(env, body) {
    const gw = await startGateway(env);
    const stopGateway = () => gw.stop();
    cleanups.add(stopGateway);
    const sampler = new ProcessSampler(gw.pid);
    let lg;
    try {
        printGateway(gw);
        const sources = await provisionSources(gw, tag, SOURCES);
        print(`  ${SOURCES} sources provisioned, each with its own active Ed25519 key, max_rate 100000/s`);
        const started = await LoadGeneratorProcess.start(gw.port, sources, tag);
        lg = started;
        return await body({
            gw,
            sampler,
            async phase(spec) {
                const bucketsBefore = await acceptLatencyBuckets(gw);
                let usage;
                let timer;
                const result = await started.phase(spec, () => {
                    sampler.beginWindow();
                    // Ended by the clock, not by the result: the drain after the window is not load.
                    timer = setTimeout(() => (usage = sampler.endWindow()), spec.durationMs);
                });
                clearTimeout(timer);
                const f = figures(result, usage ?? sampler.endWindow());
                for (const line of phaseLines(f))
                    print(line);
                const bucketsAfter = await acceptLatencyBuckets(gw);
                const bound = (q) => `≤ ${bucketQuantile(bucketsBefore, bucketsAfter, q)} ms`;
                print(`  inside the gateway (its /metrics histogram, arrival to 202): p50 ${bound(0.5)}, p99 ${bound(0.99)}, p99.9 ${bound(0.999)}`);
                return f;
            },
        });
    }
    catch (err) {
        const output = gw.output();
        if (output.length > 0)
            print(`gateway output (last ${output.length} lines):\n${output.join('\n')}`);
        throw err;
    }
    finally {
        await lg?.close();
        sampler.stop();
        print(`gateway stopped: ${await gw.stop()}; DATA_DIR removed`);
        cleanups.delete(stopGateway);
    }
}
//# sourceMappingURL=session.js.map