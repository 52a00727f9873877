import { readFileSync } from 'node:fs';
/**
 * Samples the gateway's memory and CPU from /proc every 100 ms. VmHWM is the
 * kernel's own high-water mark, so a spike between two samples is still caught;
 * VmRSS per window shows which phase drove it. CPU is split into the main thread
 * (uWS, parsing, the pipeline) and every other thread (verify workers, libuv's
 * fsync pool), which is where a throughput limit shows first.
 */
const PERIOD_MS = 100;
/** USER_HZ: /proc reports CPU times in these ticks; 100 on every mainstream Linux build. */
const TICKS_PER_S = 100;
function statusKb(text, field) {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
    return m === null ? 0 : Number(m[1]);
}
/** utime + stime from a /proc stat line; the command name may contain spaces, so count from its ')'. */
function ticksOf(stat) {
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
}
export class ProcessSampler {
    #pid;
    #timer;
    #windowMaxRssKb = 0;
    #hwmKb = 0;
    #windowStart;
    constructor(pid) {
        this.#pid = pid;
        this.#timer = setInterval(() => this.sample(), PERIOD_MS);
        this.sample();
    }
    /** Highest VmHWM seen, in MB. */
    get peakMb() {
        return this.#hwmKb / 1024;
    }
    sample() {
        try {
            const status = readFileSync(`/proc/${this.#pid}/status`, 'utf8');
            this.#windowMaxRssKb = Math.max(this.#windowMaxRssKb, statusKb(status, 'VmRSS'));
            this.#hwmKb = Math.max(this.#hwmKb, statusKb(status, 'VmHWM'));
        }
        catch {
            // The process has exited; the last sample stands.
        }
    }
    /** The process's stat counts every thread, ended ones too; the main thread's own is under task/<pid>. */
    cpu() {
        try {
            const total = ticksOf(readFileSync(`/proc/${this.#pid}/stat`, 'utf8'));
            const mainTicks = ticksOf(readFileSync(`/proc/${this.#pid}/task/${this.#pid}/stat`, 'utf8'));
            return { mainTicks, otherTicks: total - mainTicks };
        }
        catch {
            return { mainTicks: 0, otherTicks: 0 };
        }
    }
    beginWindow() {
        this.sample();
        this.#windowMaxRssKb = 0;
        this.sample();
        this.#windowStart = { at: performance.now(), cpu: this.cpu() };
    }
    endWindow() {
        this.sample();
        const start = this.#windowStart ?? { at: performance.now(), cpu: this.cpu() };
        const seconds = Math.max(1e-3, (performance.now() - start.at) / 1000);
        const cpu = this.cpu();
        return {
            maxRssMb: this.#windowMaxRssKb / 1024,
            hwmMb: this.#hwmKb / 1024,
            mainCores: (cpu.mainTicks - start.cpu.mainTicks) / TICKS_PER_S / seconds,
            otherCores: (cpu.otherTicks - start.cpu.otherTicks) / TICKS_PER_S / seconds,
        };
    }
    stop() {
        clearInterval(this.#timer);
    }
}
//# sourceMappingURL=process-sampler.js.map