import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
const ENTRY = fileURLToPath(new URL('./load-generator.js', import.meta.url));
/** The orchestrator's handle on the forked load generator: one phase at a time, over IPC. */
export class LoadGeneratorProcess {
    #child;
    #waiter;
    #exited;
    constructor(child) {
        this.#child = child;
        child.on('message', (m) => {
            if (m.kind === 'error')
                this.#waiter?.reject(new Error(`load generator: ${m.message}`));
            else
                this.#waiter?.onMessage(m);
        });
        this.#exited = new Promise((resolve) => child.once('exit', (code, signal) => {
            this.#waiter?.reject(new Error(`load generator exited (${signal ?? code})`));
            resolve();
        }));
    }
    get pid() {
        return this.#child.pid;
    }
    static async start(port, sources, tag) {
        // --expose-gc: the load generator collects its own garbage before each timed window
        // (load-generator.ts), so its pauses are not measured as the gateway's latency.
        const lg = new LoadGeneratorProcess(fork(ENTRY, [], { execArgv: process.env.LG_ARGS ? process.env.LG_ARGS.split(' ') : [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: ['--expose-gc'] }));
        await lg.#request({ kind: 'init', port, sources, tag }, (m) => (m.kind === 'ready' ? true : undefined));
        return lg;
    }
    /** Runs one phase; `started` fires when the load generator starts its clock (after signing and connecting). */
    phase(spec, started) {
        return this.#request({ kind: 'phase', spec }, (m) => {
            if (m.kind === 'started')
                started();
            return m.kind === 'result' ? m.result : undefined;
        });
    }
    async close() {
        if (this.#child.exitCode === null && this.#child.connected)
            this.#child.send({ kind: 'exit' });
        const timer = setTimeout(() => this.#child.kill('SIGKILL'), 5_000);
        await this.#exited;
        clearTimeout(timer);
    }
    #request(message, pick) {
        if (this.#waiter !== undefined)
            throw new Error('one load generator request at a time');
        return new Promise((resolve, reject) => {
            this.#waiter = {
                onMessage: (m) => {
                    const value = pick(m);
                    if (value === undefined)
                        return;
                    this.#waiter = undefined;
                    resolve(value);
                },
                reject: (err) => {
                    this.#waiter = undefined;
                    reject(err);
                },
            };
            this.#child.send(message);
        });
    }
}
//# sourceMappingURL=load-generator-process.js.map