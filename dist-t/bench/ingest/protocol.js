/**
 * Messages between the orchestrator (`run.ts`) and the load generator
 * (`load-generator.ts`), which run as separate processes so that the client's CPU
 * shows up as a separate process and never shares an event loop with the sampler.
 */
export {};
//# sourceMappingURL=protocol.js.map